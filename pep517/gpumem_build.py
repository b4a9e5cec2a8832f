"""gpumem_build -- gpumem's PEP 517 build backend (pyproject.toml).

'pip install .', 'pip install gpumem-VERSION.tar.gz' and 'python -m build'
call these hooks in the root of the source tree.  They drive the one
autotools build (configure.ac, Makefile.am) rather than describe it a
second time: build_wheel configures a build folder for the interpreter
that runs the hook, has make build and install the extension module and
the C headers into a staging folder, and packs them into a wheel;
build_sdist packs 'make distdir' (which ships the generated configure)
with PKG-INFO.  A git checkout has no configure: autoreconf makes it
first (autoconf, automake, libtool).  Standard library only, so pip's
isolated build environment needs nothing from the network;
docs/install.md says why this backend and not another.

The wheel holds
    gpumem<EXT_SUFFIX>              the extension module (gpumem.abi3.so
                                    where configure-args has
                                    --enable-abi3: the wheel is then
                                    tagged cp311-abi3, one for every
                                    CPython from 3.11)
    gpumem-include/gpumem/*.h       the headers; gpumem.get_include()
                                    returns this folder
    gpumem-stubs/*.pyi              the type stubs (PEP 561), which mypy
                                    and pyright find beside the module
    gpumem-lib/libgpumem-torch.so   the PyTorch allocator shim, which the
                                    module finds beside itself
    gpumem-lib/pkgconfig/gpumem.pc  pkg-config's description of the
                                    headers (no library: an extension
                                    takes gpumem's C API from its capsule)
    gpumem-VERSION.data/data/share/man/   the manual pages, which pip
                                    puts in the environment's share/man
    gpumem-VERSION.data/data/share/gpumem/scripts/, .../examples/
                                    the example scripts and programs, in
                                    the environment's share/gpumem as
                                    make install puts them in
                                    PREFIX/share/gpumem
    gpumem-VERSION.data/data/share/licenses/gpumem/LICENSE, and
    gpumem-VERSION.dist-info/licenses/LICENSE   the license
    gpumem-VERSION.dist-info/       METADATA (License: BSD-3-Clause),
                                    WHEEL, RECORD, licenses/LICENSE

The metadata's optional extras (EXTRAS) name NVIDIA's wheels of the
libraries the module opens at run time: gpumem[jit] installs NVRTC,
which the module finds in site-packages (src/plugin/jit.c), and
gpumem[nccl] NCCL (src/comm/comm-nccl-load.c); gpumem[mpi] installs
mpi4py, which shares the module's MPI (docs/mpi.md).

Config settings (pip install -C KEY=VALUE, python -m build -C...):
    configure-args  more arguments for configure, split as the shell
                    splits them ("--without-cuda --with-mpi=no"); the
                    environment variable GPUMEM_CONFIGURE_ARGS is read
                    first, for a pip without -C; the released wheel's
                    are "--with-mpi=no --enable-abi3
                    CC=$PWD/pep517/zig-cc" (CC an absolute path;
                    docs/install.md)
    build-dir       a build folder to keep and reuse (configured there
                    once); by default a temporary folder, removed after
"""

import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile

NAME = "gpumem"
SUMMARY = ("GPU memory owned by Python, handed to native CUDA kernels "
           "(the extension module of the gpumem program)")
REQUIRES_PYTHON = ">=3.9"
# The license (SPDX; the text is LICENSE), as pyproject.toml declares it.
LICENSE = "BSD-3-Clause"
REQUIRES_DIST = ["numpy"]
EXTRAS = {"jit": ["nvidia-cuda-nvrtc>=13,<14"],
          "nccl": ["nvidia-nccl-cu13"],
          "mpi": ["mpi4py>=4"]}
INCLUDE_FOLDER = "gpumem-include"
STUBS_FOLDER = "gpumem-stubs"
LIB_FOLDER = "gpumem-lib"
MAN_PAGES = ["man/gpumem.1", "man/gpumem-kernels.7", "man/gpumem-capi.3"]


class BuildError(RuntimeError):
    """A step of the build failed; the message says which and what to do."""


def _version():
    """The package version, from configure.ac's AC_INIT (its one source)."""
    with open("configure.ac", encoding="utf-8") as f:
        m = re.search(r"AC_INIT\(\[gpumem\],\s*\[([^\]]+)\]", f.read())
    if m is None:
        raise BuildError("configure.ac: no AC_INIT([gpumem], [VERSION])")
    return m.group(1)


def _metadata():
    """The core metadata (METADATA, PKG-INFO) as text."""
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}",
             f"Version: {_version()}", f"Summary: {SUMMARY}",
             f"Requires-Python: {REQUIRES_PYTHON}",
             f"License: {LICENSE}", "License-File: LICENSE",
             "Classifier: License :: OSI Approved :: BSD License"]
    lines += [f"Requires-Dist: {req}" for req in REQUIRES_DIST]
    for extra, reqs in EXTRAS.items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {req}; extra == "{extra}"'
                  for req in reqs]
    lines.append("Description-Content-Type: text/markdown")
    with open("README.md", encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines) + "\n\n" + readme


def _run(argv, cwd, what):
    """Runs ARGV in CWD, its output passed through; BuildError naming
    WHAT when it fails or cannot start."""
    print("gpumem_build: " + " ".join(shlex.quote(a) for a in argv),
          flush=True)
    try:
        subprocess.run(argv, cwd=cwd, check=True)
    except FileNotFoundError as exc:
        raise BuildError(f"{what}: {argv[0]} not found ({exc})") from None
    except subprocess.CalledProcessError as exc:
        raise BuildError(f"{what} failed (exit status {exc.returncode}); "
                         "its output is above") from None


def _ensure_configure(srcdir):
    """Makes SRCDIR/configure with autoreconf where it is missing (a git
    checkout; an sdist ships it)."""
    if os.path.exists(os.path.join(srcdir, "configure")):
        return
    if shutil.which("autoreconf") is None:
        raise BuildError(
            "this source tree has no configure script and autoreconf is "
            "not installed: install autoconf, automake, libtool and "
            "pkg-config (apt-get install autoconf automake libtool "
            "pkg-config), or pip install an sdist, which ships configure")
    _run(["autoreconf", "-fi"], srcdir, "autoreconf")


def _configure_args(config_settings):
    args = shlex.split(os.environ.get("GPUMEM_CONFIGURE_ARGS", ""))
    extra = (config_settings or {}).get("configure-args", "")
    if isinstance(extra, list):
        extra = " ".join(extra)
    return args + shlex.split(extra)


def _configure(srcdir, builddir, args):
    """Configures BUILDDIR (unless it has a Makefile) for the interpreter
    that runs this hook.  NumPy is not asked for: nothing is compiled
    against it, and pip's isolated build environment lacks it."""
    if os.path.exists(os.path.join(srcdir, "config.status")):
        raise BuildError(
            f"{srcdir} is configured in place (./configure ran there), "
            "so it cannot configure a build folder of its own: run "
            "'make distclean' there first, or pip install a clean copy "
            "(git archive HEAD) or an sdist")
    if os.path.exists(os.path.join(builddir, "Makefile")):
        return
    _run([os.path.join(srcdir, "configure"), f"PYTHON={sys.executable}",
          "--disable-numpy-check"] + args, builddir, "configure")


def _jobs():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


ABI3_PYTHON = (3, 11)   # m4/gm_python_module.m4's Py_LIMITED_API


def _abi3(config_settings):
    """Whether the module is built against the limited API (configure
    --enable-abi3), as the configure arguments say."""
    args = _configure_args(config_settings)
    return "--enable-abi3" in args or "--enable-abi3=yes" in args


def _ext_suffix(abi3):
    return ".abi3.so" if abi3 else sysconfig.get_config_var("EXT_SUFFIX")


def _wheel_tag(abi3=False):
    """(python, abi, platform) of the running CPython, as in the wheel's
    file name: cp311-abi3 for a module built against the limited API."""
    if sys.implementation.name != "cpython":
        raise BuildError("gpumem's extension module is built for CPython "
                         f"only, not {sys.implementation.name}")
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    if abi3:
        if sys.version_info[:2] < ABI3_PYTHON:
            raise BuildError("--enable-abi3 needs CPython %d.%d or later "
                             "to build with" % ABI3_PYTHON)
        return "cp%d%d" % ABI3_PYTHON, "abi3", platform
    soabi = sysconfig.get_config_var("SOABI") or ""
    parts = soabi.split("-")
    if len(parts) < 2 or not parts[0] == "cpython":
        raise BuildError(f"unexpected SOABI '{soabi}'")
    python = "cp%d%d" % sys.version_info[:2]
    return python, "cp" + parts[1], platform


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _zip_write(archive, name, data, mode=0o644):
    """Adds NAME to ARCHIVE with a fixed date (SOURCE_DATE_EPOCH where
    set), so that a rebuild of the same files gives the same wheel."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    date = max(epoch, 315532800)
    info = zipfile.ZipInfo(name, date_time=time.gmtime(date)[:6])
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def _dist_info_files(tag):
    python, abi, platform = tag
    wheel = ("Wheel-Version: 1.0\nGenerator: gpumem_build\n"
             "Root-Is-Purelib: false\n"
             f"Tag: {python}-{abi}-{platform}\n")
    with open("LICENSE", encoding="utf-8") as f:
        license_text = f.read()
    return {"METADATA": _metadata(), "WHEEL": wheel,
            "licenses/LICENSE": license_text}


def _dist_info_name():
    return f"{NAME}-{_version()}.dist-info"


def _pkg_config(builddir):
    """gpumem.pc for the wheel's gpumem-lib/pkgconfig: the headers beside
    it, found from the file's own place, and the configured kernels'
    nvcc code-generation flags (nvcc_arch) from the build's gpumem.pc."""
    nvcc_arch = ""
    with open(os.path.join(builddir, "gpumem.pc"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("nvcc_arch="):
                nvcc_arch = line.split("=", 1)[1].strip()
    return ("# gpumem.pc -- pkg-config's description of a pip-installed\n"
            "# gpumem's headers (PKG_CONFIG_PATH=SITE-PACKAGES/gpumem-lib/"
            "pkgconfig).\n# A wheel has no libgpumem: an extension takes "
            "gpumem's C API from the\n# module's capsule "
            "(gpumem/extension.h).\n"
            "prefix=${pcfiledir}/../..\n"
            f"includedir=${{prefix}}/{INCLUDE_FOLDER}\n"
            "pyexecdir=${prefix}\n"
            f"nvcc_arch={nvcc_arch}\n"
            f"license={LICENSE}\n\n"
            f"Name: {NAME}\nDescription: {SUMMARY}\n"
            f"Version: {_version()}\nCflags: -I${{includedir}}\nLibs:\n")


# The PEP 517 hooks.

def get_requires_for_build_wheel(config_settings=None):
    """Nothing from the network: the build needs the system's C compiler,
    make and Python headers (and autotools for a git checkout)."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory,
                                     config_settings=None):
    """Writes the dist-info folder without building (pip asks for the
    metadata first)."""
    name = _dist_info_name()
    path = os.path.join(metadata_directory, name)
    os.makedirs(path, exist_ok=True)
    tag = _wheel_tag(_abi3(config_settings))
    for filename, text in _dist_info_files(tag).items():
        os.makedirs(os.path.dirname(os.path.join(path, filename)),
                    exist_ok=True)
        with open(os.path.join(path, filename), "w", encoding="utf-8") as f:
            f.write(text)
    return name


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    """Builds the extension module for this interpreter with configure
    and make, and packs it and the headers into a wheel in
    WHEEL_DIRECTORY; returns the wheel's file name."""
    srcdir = os.getcwd()
    abi3 = _abi3(config_settings)
    tag = _wheel_tag(abi3)
    _ensure_configure(srcdir)
    kept = (config_settings or {}).get("build-dir")
    builddir = os.path.abspath(kept) if kept else tempfile.mkdtemp(
        prefix="gpumem-build-")
    os.makedirs(builddir, exist_ok=True)
    try:
        _configure(srcdir, builddir, _configure_args(config_settings))
        stage = os.path.join(builddir, "wheel-stage")
        shutil.rmtree(stage, ignore_errors=True)
        # Makefile.am's own install rules for the module, its stubs and
        # the headers alone, into the staging folder: the same files make
        # install puts in pyexecdir and includedir/gpumem.
        # The example scripts and programs too, where the environment's
        # share/gpumem gets them (as make install's PREFIX/share/gpumem).
        share = f"/wheel/{NAME}-{_version()}.data/data/share"
        _run(["make", f"-j{_jobs()}", "install-pyexecLTLIBRARIES",
              "install-nodist_gpumemstubsDATA",
              "install-gpumemincludeHEADERS", "install-pkglibLTLIBRARIES",
              "install-dist_scriptsDATA", "install-nobase_dist_exampleDATA",
              "install-dist_licenseDATA",
              f"DESTDIR={stage}", "pyexecdir=/wheel",
              f"gpumemstubsdir=/wheel/{STUBS_FOLDER}",
              f"gpumemincludedir=/wheel/{INCLUDE_FOLDER}/gpumem",
              f"pkglibdir=/wheel/{LIB_FOLDER}",
              f"scriptsdir={share}/gpumem/scripts",
              f"exampledir={share}/gpumem",
              f"licensedir={share}/licenses/gpumem"],
             builddir, "make")
        root = os.path.join(stage, "wheel")
        pkgconfig = os.path.join(root, LIB_FOLDER, "pkgconfig")
        os.makedirs(pkgconfig)
        with open(os.path.join(pkgconfig, "gpumem.pc"), "w",
                  encoding="utf-8") as f:
            f.write(_pkg_config(builddir))
        # The manual pages as the sources have them (gpumem.1 names
        # installed paths as PREFIX/...), for the environment's share/man.
        data = f"{NAME}-{_version()}.data/data/share/man"
        for page in MAN_PAGES:
            section = os.path.join(root, data, "man" + page[-1])
            os.makedirs(section, exist_ok=True)
            shutil.copy(os.path.join(srcdir, page), section)
        files = []
        for folder, _, names in os.walk(root):
            for filename in names:
                if filename.endswith(".la"):
                    continue      # libtool's description, not for Python
                path = os.path.join(folder, filename)
                files.append(os.path.relpath(path, root).replace(os.sep, "/"))
        files.sort()
        suffix = _ext_suffix(abi3)
        if "gpumem" + suffix not in files:
            raise BuildError(f"make installed no gpumem{suffix} "
                             f"(installed: {files})")
        data_share = f"{NAME}-{_version()}.data/data/share"
        for needed in (f"{STUBS_FOLDER}/__init__.pyi",
                       f"{LIB_FOLDER}/libgpumem-torch.so",
                       f"{data_share}/gpumem/scripts/interop.py",
                       f"{data_share}/gpumem/examples/run-examples.sh",
                       f"{data_share}/licenses/gpumem/LICENSE"):
            if needed not in files:
                raise BuildError(f"make installed no {needed} "
                                 f"(installed: {files})")
        wheel_name = f"{NAME}-{_version()}-{'-'.join(tag)}.whl"
        dist_info = _dist_info_name()
        record = []
        with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name),
                             "w") as archive:
            for name in files:
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    data = f.read()
                mode = 0o755 if os.access(path, os.X_OK) else 0o644
                _zip_write(archive, name, data, mode)
                record.append(f"{name},{_record_hash(data)},{len(data)}")
            for filename, text in _dist_info_files(tag).items():
                data = text.encode("utf-8")
                name = f"{dist_info}/{filename}"
                _zip_write(archive, name, data)
                record.append(f"{name},{_record_hash(data)},{len(data)}")
            record.append(f"{dist_info}/RECORD,,")
            _zip_write(archive, f"{dist_info}/RECORD",
                       ("\n".join(record) + "\n").encode("utf-8"))
    finally:
        if kept:
            shutil.rmtree(os.path.join(builddir, "wheel-stage"),
                          ignore_errors=True)
        else:
            shutil.rmtree(builddir, ignore_errors=True)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    """Packs the source distribution make distdir assembles (configure
    included) with PKG-INFO into SDIST_DIRECTORY/gpumem-VERSION.tar.gz;
    returns its file name.  A tree configured in place is its own build
    folder; otherwise a temporary one is configured (without CUDA and
    MPI: the distribution is the same)."""
    srcdir = os.getcwd()
    base = f"{NAME}-{_version()}"
    _ensure_configure(srcdir)
    in_place = os.path.exists(os.path.join(srcdir, "config.status"))
    builddir = srcdir if in_place else tempfile.mkdtemp(
        prefix="gpumem-sdist-")
    distdir = tempfile.mkdtemp(prefix="gpumem-distdir-")
    try:
        if not in_place:
            _configure(srcdir, builddir, ["--without-cuda", "--with-mpi=no"]
                       + _configure_args(config_settings))
        tree = os.path.join(distdir, base)
        _run(["make", f"distdir={tree}", "distdir"], builddir,
             "make distdir")
        with open(os.path.join(tree, "PKG-INFO"), "w",
                  encoding="utf-8") as f:
            f.write(_metadata())
        for needed in ("configure", "pyproject.toml",
                       "pep517/gpumem_build.py", "LICENSE"):
            if not os.path.exists(os.path.join(tree, needed)):
                raise BuildError(f"make distdir left out {needed} "
                                 "(Makefile.am's EXTRA_DIST)")
        sdist_name = base + ".tar.gz"

        def owned_by_root(info):
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            return info

        with tarfile.open(os.path.join(sdist_directory, sdist_name), "w:gz",
                          format=tarfile.PAX_FORMAT) as archive:
            archive.add(tree, arcname=base, filter=owned_by_root)
    finally:
        shutil.rmtree(distdir, ignore_errors=True)
        if not in_place:
            shutil.rmtree(builddir, ignore_errors=True)
    return sdist_name
