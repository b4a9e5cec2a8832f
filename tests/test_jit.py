"""gpumem.jit: compiling with NVRTC (jit.c, py-jit.c) on both backends,
the disk cache (miss, hit, corrupt file, unwritable folder; files and
folders others could have written passed over), compile
errors with NVRTC's log, the argument checks JIT kernels share with the
built-in ones, and launching on the cuda backend."""

import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings

import numpy as np

import gmtest
from gmtest import case, raises, random_array

import gpumem

CUDA = gpumem.backend == "cuda"
ARCH = None if CUDA else "compute_90"     # the host backend needs one

SCALE = r"""
extern "C" __global__ void scale(long long n, float a, float *x)
{
  long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = __fmul_rn(a, x[i]);
}
"""
SCALE_SIG = "int64 n, float32 a, float32 *x[n]"

CACHE = tempfile.mkdtemp(prefix="gpumem-jit-test-")
os.environ["GPUMEM_CACHE_DIR"] = CACHE

try:
    gpumem.jit(SCALE, "scale", SCALE_SIG, arch="compute_90")
except gpumem.Error as exc:
    if "NVRTC" in str(exc) and "not available" in str(exc):
        shutil.rmtree(CACHE, ignore_errors=True)
        gmtest.skip_file(f"no NVRTC here: {exc}")
    raise


def fresh(tag):
    """SCALE made unique by a comment: a source no cache has seen."""
    return f"// {tag} {gmtest.rng.integers(2**62)}\n" + SCALE


def cache_files(folder=CACHE):
    return sorted(f for f in os.listdir(folder) if f.endswith(".bin"))


def compile_new(tag):
    """Compiles a fresh source (fresh(TAG)) for compute_90; returns it and
    the path of the one cache file the compile added."""
    src = fresh(tag)
    files = cache_files()
    gpumem.jit(src, "scale", SCALE_SIG, arch="compute_90")
    new = sorted(set(cache_files()) - set(files))
    assert len(new) == 1, new
    return src, os.path.join(CACHE, new[0])


def stats_delta(before):
    after = gpumem.jit_stats()
    return {k: after[k] - before[k] for k in after
            if isinstance(after[k], int)}


@case
def compiles_without_a_gpu():
    src = fresh("ptx")
    before = gpumem.jit_stats()
    f = gpumem.jit(src, "scale", SCALE_SIG, arch="compute_90")
    d = stats_delta(before)
    assert d["compiles"] == 1 and d["cache_misses"] == 1, d
    assert gpumem.jit_stats()["last_compile_seconds"] > 0
    assert f.__name__ == "scale"
    assert "scale(n: int64, a: float32, x: float32[n] inout)" in f.__doc__
    assert "compute_90" in f.__doc__
    # CUBIN for an explicit sm_ architecture.
    gpumem.jit(src, "scale", SCALE_SIG, arch="sm_90")


@case
def same_call_same_function():
    src = fresh("memo")
    f = gpumem.jit(src, "scale", SCALE_SIG, arch=ARCH)
    before = gpumem.jit_stats()
    assert gpumem.jit(src, "scale", SCALE_SIG, arch=ARCH) is f
    d = stats_delta(before)
    assert d["reused"] == 1 and d["compiles"] == 0, d


@case
def cache_miss_then_hit():
    before = gpumem.jit_stats()
    src, _ = compile_new("hit")
    assert stats_delta(before)["cache_misses"] == 1
    # Another signature text (spaces) is another function, but the same
    # code: read from the disk, not compiled.
    before = gpumem.jit_stats()
    gpumem.jit(src, "scale", "int64 n,float32 a,  float32 * x[ n ]",
               arch="compute_90")
    d = stats_delta(before)
    assert d["cache_hits"] == 1 and d["compiles"] == 0, d
    # A new process finds it too.
    proc = subprocess.run(
        [gmtest.GPUMEM, "-q", "--backend=host", "-c",
         "import gpumem, sys\n"
         "gpumem.jit(sys.argv[1], 'scale', sys.argv[2], arch='compute_90')\n"
         "s = gpumem.jit_stats()\n"
         "print(s['cache_hits'], s['compiles'])", src, SCALE_SIG],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "0"], proc.stdout
    # Options, architecture, name and signature (what it says, not how
    # it is spelt) are part of the key.
    before = gpumem.jit_stats()
    gpumem.jit(src, "scale", SCALE_SIG, ["-DUNUSED=1"], arch="compute_90")
    gpumem.jit(src, "scale", SCALE_SIG, arch="compute_80")
    gpumem.jit(src, "scale", "int64 n, float32 a, out float32 *x[n]",
               arch="compute_90")
    assert stats_delta(before)["compiles"] == 3


@case
def cache_file_format():
    # The layout jit.c documents, its SHA-256 checked against hashlib's
    # (the PTX spans many blocks).
    _, path = compile_new("format")
    data = open(path, "rb").read()
    assert data[:8] == b"GMJIT001", data[:8]
    assert data[8:40].hex() + ".bin" == os.path.basename(path), path
    entry_len = int.from_bytes(data[40:44], "little")
    image_len = int.from_bytes(data[44:52], "little")
    assert len(data) == 84 + entry_len + image_len, (len(data), entry_len,
                                                     image_len)
    assert data[84:84 + entry_len] == b"scale", data[84:84 + entry_len]
    image = data[84 + entry_len:]
    assert b".entry scale" in image
    assert data[52:84] == hashlib.sha256(image).digest()


@case
def corrupt_file_recompiled():
    src, path = compile_new("corrupt")
    good = open(path, "rb").read()
    damages = (b"", good[:50], good[:-1], b"x" * len(good),
               good[:-10] + b"0123456789")
    for i, damage in enumerate(damages):
        with open(path, "wb") as f:
            f.write(damage)
        before = gpumem.jit_stats()
        # Another spelling of the signature: not the function made
        # before, so the call reads the disk.
        gpumem.jit(src, "scale", SCALE_SIG + " " * (i + 1),
                   arch="compute_90")
        d = stats_delta(before)
        assert d["cache_corrupt"] == 1 and d["compiles"] == 1, (i, d)
        assert open(path, "rb").read() == good, i


@case
def unwritable_cache_compiles_anyway():
    blocker = os.path.join(CACHE, "a-file")
    open(blocker, "w").close()
    folders = [os.path.join(blocker, "sub")]       # a file in the way
    if os.geteuid() != 0:
        readonly = tempfile.mkdtemp(prefix="gpumem-jit-ro-")
        os.chmod(readonly, 0o555)
        folders.append(readonly)
    else:
        print("  (a read-only folder is not tested: root writes anywhere; "
              "a file in the way makes the folder unwritable instead)")
    for folder in folders:
        os.environ["GPUMEM_CACHE_DIR"] = folder
        try:
            before = gpumem.jit_stats()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                f = gpumem.jit(fresh("ro"), "scale", SCALE_SIG,
                               arch="compute_90")
            d = stats_delta(before)
            assert d["compiles"] == 1 and d["cache_unwritable"] == 1, d
            assert len(caught) == 1, [str(w.message) for w in caught]
            assert issubclass(caught[0].category, RuntimeWarning)
            assert "without a cache" in str(caught[0].message)
            assert folder in str(caught[0].message) or \
                blocker in str(caught[0].message), str(caught[0].message)
            assert callable(f)
            if os.path.isdir(folder):
                assert os.listdir(folder) == []
        finally:
            os.environ["GPUMEM_CACHE_DIR"] = CACHE
    for folder in folders[1:]:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)


ADD = SCALE.replace("__fmul_rn(a, x[i])", "a + x[i]")


def with_cache(folder, call):
    """Runs CALL with GPUMEM_CACHE_DIR set to FOLDER, warnings recorded:
    returns what it returned, the stats' change and the warnings."""
    os.environ["GPUMEM_CACHE_DIR"] = folder
    try:
        before = gpumem.jit_stats()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = call()
        return value, stats_delta(before), caught
    finally:
        os.environ["GPUMEM_CACHE_DIR"] = CACHE


def planted(src):
    """An attacker's cache file for SRC: the code of ADD (x[i] = a + x[i])
    under SRC's key, its checksum valid.  Returns the file's name and
    bytes."""
    scratch = tempfile.mkdtemp(prefix="gpumem-jit-key-")
    try:
        # SRC's key: the name of the file its own compile writes.
        # (A spelling of the signature of its own: the function is not
        # remembered for the callers' calls.)
        with_cache(scratch, lambda: gpumem.jit(src, "scale", "\t" + SCALE_SIG,
                                               arch=ARCH))
        name, = cache_files(scratch)
        os.unlink(os.path.join(scratch, name))
        with_cache(scratch, lambda: gpumem.jit(fresh("evil").replace(SCALE, ADD), "scale",
                                               SCALE_SIG, arch=ARCH))
        evil, = cache_files(scratch)
        data = open(os.path.join(scratch, evil), "rb").read()
    finally:
        shutil.rmtree(scratch)
    data = data[:8] + bytes.fromhex(name[:-4]) + data[40:]
    return name, data


def check_untrusted(folder, src, spelling, why):
    """gpumem.jit of SRC with the cache in FOLDER: the planted file is
    passed over with one warning that names FOLDER and says WHY, the
    kernel is compiled again and is the real one, and FOLDER is left as
    it was."""
    listing = {f: os.lstat(os.path.join(folder, f))
               for f in os.listdir(folder)}
    f, d, caught = with_cache(folder, lambda: gpumem.jit(
        src, "scale", SCALE_SIG + " " * spelling, arch=ARCH))
    assert d["cache_untrusted"] == 1 and d["compiles"] == 1, d
    assert d["cache_hits"] == 0 and d["cache_unwritable"] == 0, d
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert issubclass(caught[0].category, RuntimeWarning), caught[0]
    assert folder in message and why in message, message
    assert "nothing is written" in message, message
    after = {f: os.lstat(os.path.join(folder, f))
             for f in os.listdir(folder)}
    assert after.keys() == listing.keys(), (listing, after)
    for name, st in listing.items():
        assert (after[name].st_mtime_ns, after[name].st_uid,
                after[name].st_mode) == (st.st_mtime_ns, st.st_uid,
                                         st.st_mode), name
    if CUDA:
        x = gpumem.to_device(np.full(100, 3, np.float32))
        f(100, 2.0, x)
        # 6 from the real kernel; the planted one would give 5.
        assert np.array_equal(x.copy_to_host(), np.full(100, 6, np.float32))
    # The same call again is answered in memory, without a new warning.
    g, d, caught = with_cache(folder, lambda: gpumem.jit(
        src, "scale", SCALE_SIG + " " * spelling, arch=ARCH))
    assert g is f and d["compiles"] == 0 and not caught, (d, caught)


def plant(folder, src, mode=0o644):
    name, data = planted(src)
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    os.write(fd, data)
    os.close(fd)
    os.chmod(path, mode)
    return path


def own_folder(tag):
    return tempfile.mkdtemp(prefix=f"gpumem-jit-{tag}-")


@case
def planted_file_is_read_when_trusted():
    # The control for the cases below: the same planted file, in a folder
    # and with a mode the user alone controls, is read (the key and the
    # checksum alone do not stop it), and runs the planted code.
    folder = own_folder("trusted")
    try:
        src = fresh("trusted")
        plant(folder, src)
        f, d, caught = with_cache(folder, lambda: gpumem.jit(
            src, "scale", SCALE_SIG, arch=ARCH))
        assert d["cache_hits"] == 1 and d["compiles"] == 0, d
        assert d["cache_untrusted"] == 0 and not caught, (d, caught)
        if CUDA:
            x = gpumem.to_device(np.full(100, 3, np.float32))
            f(100, 2.0, x)
            assert np.array_equal(x.copy_to_host(),
                                  np.full(100, 5, np.float32))
    finally:
        shutil.rmtree(folder)


@case
def file_of_another_user_is_ignored():
    if os.geteuid() != 0:
        gmtest.skip("planting a file of another user needs root (chown)")
    folder = own_folder("other-user")
    try:
        src = fresh("other-user")
        path = plant(folder, src)
        os.chown(path, 65534, 65534)
        check_untrusted(folder, src, 1, "belongs to another user (uid 65534)")
    finally:
        shutil.rmtree(folder)


@case
def folder_of_another_user_is_ignored():
    if os.geteuid() != 0:
        gmtest.skip("a folder of another user needs root (chown)")
    folder = own_folder("other-folder")
    try:
        src = fresh("other-folder")
        plant(folder, src)
        os.chown(folder, 65534, 65534)
        check_untrusted(folder, src, 2, "belongs to another user (uid 65534)")
    finally:
        shutil.rmtree(folder)


@case
def group_writable_file_is_ignored():
    folder = own_folder("group")
    try:
        src = fresh("group")
        plant(folder, src, 0o664)
        check_untrusted(folder, src, 3, "writable by other users")
    finally:
        shutil.rmtree(folder)


@case
def symbolic_link_is_ignored():
    folder, elsewhere = own_folder("link"), own_folder("link-target")
    try:
        src = fresh("link")
        target = plant(elsewhere, src)
        os.symlink(target, os.path.join(folder, os.path.basename(target)))
        check_untrusted(folder, src, 4, "symbolic link")
    finally:
        shutil.rmtree(folder)
        shutil.rmtree(elsewhere)


@case
def world_writable_folder_is_ignored():
    folder = own_folder("world")
    try:
        src = fresh("world")
        plant(folder, src)
        os.chmod(folder, 0o777)
        check_untrusted(folder, src, 5, "writable by every user")
        # Sticky, as /tmp: the user's own file is trusted there, and a
        # miss is written.
        os.chmod(folder, 0o1777)
        _, d, caught = with_cache(folder, lambda: gpumem.jit(
            src, "scale", SCALE_SIG + " " * 6, arch=ARCH))
        assert d["cache_hits"] == 1 and not caught, (d, caught)
        _, d, caught = with_cache(folder, lambda: gpumem.jit(
            fresh("sticky"), "scale", SCALE_SIG, arch=ARCH))
        assert d["cache_misses"] == 1 and not caught, (d, caught)
        assert len(cache_files(folder)) == 2, cache_files(folder)
    finally:
        shutil.rmtree(folder)


def _private_group():
    """The user's private group (named as the user, no other member
    listed), or None."""
    import grp
    import pwd
    user = pwd.getpwuid(os.geteuid()).pw_name
    try:
        group = grp.getgrnam(user)
    except KeyError:
        return None
    return group.gr_gid if set(group.gr_mem) <= {user} else None


def _shared_group():
    """A group the user may give a folder that is not the user's private
    group (root: any; else one of the user's groups), or None."""
    import grp
    private = _private_group()
    if os.geteuid() == 0:
        candidates = [g.gr_gid for g in grp.getgrall()]
    else:
        candidates = os.getgroups()
    return next((g for g in candidates if g != private), None)


@case
def group_writable_folder_is_ignored():
    # A folder its group can write is others' to write, unless that group
    # is the user's private group: a file there is passed over.
    shared = _shared_group()
    if shared is None:
        gmtest.skip("no group other than the user's private group to "
                    "give a folder")
    folder = own_folder("group-folder")
    try:
        src = fresh("group-folder")
        plant(folder, src)
        os.chown(folder, -1, shared)
        os.chmod(folder, 0o770)
        check_untrusted(folder, src, 7, "writable by its group (gid %d)"
                        % shared)
        # Sticky, as /tmp: the user's own file is read there.
        os.chmod(folder, 0o1770)
        _, d, caught = with_cache(folder, lambda: gpumem.jit(
            src, "scale", SCALE_SIG + " " * 8, arch=ARCH))
        assert d["cache_hits"] == 1 and not caught, (d, caught)
        private = _private_group()
        if private is not None:
            # The user's private group: trusted as the user alone.
            os.chmod(folder, 0o770)
            os.chown(folder, -1, private)
            _, d, caught = with_cache(folder, lambda: gpumem.jit(
                src, "scale", SCALE_SIG + " " * 9, arch=ARCH))
            assert d["cache_hits"] == 1 and not caught, (d, caught)
    finally:
        shutil.rmtree(folder)


@case
def cache_folder_through_a_link():
    # GPUMEM_CACHE_DIR naming a symbolic link: the user's own link is
    # followed and what it leads to checked as any folder; another
    # user's link (one planted in /tmp) is not followed.
    base, target = own_folder("link-base"), own_folder("link-folder")
    try:
        src = fresh("link-folder")
        plant(target, src)
        link = os.path.join(base, "cache")
        os.symlink(target, link)
        _, d, caught = with_cache(link, lambda: gpumem.jit(
            src, "scale", SCALE_SIG + " " * 10, arch=ARCH))
        assert d["cache_hits"] == 1 and not caught, (d, caught)
        os.chmod(target, 0o777)
        check_untrusted(link, src, 11, "writable by every user")
        os.chmod(target, 0o700)
        if os.geteuid() != 0:
            gmtest.skip("a link of another user needs root (lchown)")
        os.lchown(link, 65534, 65534)
        check_untrusted(link, src, 12,
                        "is a symbolic link of another user (uid 65534)")
    finally:
        shutil.rmtree(base)
        shutil.rmtree(target)


@case
def cache_folder_and_files_are_private():
    # The folder is made 0700 (its parents as mkdir -p makes them), each
    # file 0600; a folder that exists keeps its mode.
    base = own_folder("modes")
    try:
        umask = os.umask(0o022)
        os.umask(umask)
        folder = os.path.join(base, "a", "b")
        with_cache(folder, lambda: gpumem.jit(fresh("modes"), "scale",
                                              SCALE_SIG, arch=ARCH))
        assert os.stat(folder).st_mode & 0o7777 == 0o700, \
            oct(os.stat(folder).st_mode)
        parent = os.stat(os.path.join(base, "a")).st_mode & 0o7777
        assert parent == 0o777 & ~umask, (oct(parent), oct(umask))
        name, = cache_files(folder)
        assert os.stat(os.path.join(folder, name)).st_mode & 0o777 == 0o600
        os.chmod(base, 0o750)
        with_cache(base, lambda: gpumem.jit(fresh("modes"), "scale",
                                            SCALE_SIG, arch=ARCH))
        assert os.stat(base).st_mode & 0o7777 == 0o750
        assert not [f for f in os.listdir(folder) if f.startswith(".tmp")]
    finally:
        shutil.rmtree(base)


@case
def compile_errors_carry_the_log():
    bad = 'extern "C" __global__ void scale(long long n) { undefined_thing(n); }'
    exc = raises(gpumem.Error, gpumem.jit, bad, "scale", "int64 n",
                 arch="compute_90", match="NVRTC's log")
    assert "undefined_thing" in str(exc), exc
    assert "scale" in str(exc), exc
    raises(gpumem.Error, gpumem.jit, SCALE, "no_such_kernel", SCALE_SIG,
           arch="compute_90")
    raises(gpumem.Error, gpumem.jit, SCALE, "scale", SCALE_SIG,
           ["--no-such-option"], arch="compute_90")


@case
def bad_arguments():
    raises(ValueError, gpumem.jit, SCALE, "scale", "int64 n, float32 *x",
           arch="compute_90", match="kernel 'scale'")
    raises(ValueError, gpumem.jit, SCALE, "scale", "int64 n, float32 *x[m]",
           arch="compute_90", match="names no parameter")
    raises(ValueError, gpumem.jit, SCALE, "scale",
           "int64 n, out const float32 *x[n]", arch="compute_90",
           match="direction must be in")
    raises(ValueError, gpumem.jit, SCALE, "scale", "int64 stream",
           arch="compute_90", match="may not be named")
    raises(TypeError, gpumem.jit, SCALE, "scale", SCALE_SIG, "-O3",
           arch="compute_90", match="not one str")
    raises(TypeError, gpumem.jit, SCALE, "scale", SCALE_SIG, [3],
           arch="compute_90", match="options[0]")
    raises(TypeError, gpumem.jit, b"source", "scale", SCALE_SIG)
    raises(TypeError, gpumem.jit, SCALE, "scale", SCALE_SIG, arch=90)
    raises(TypeError, gpumem.jit, SCALE, "scale")
    # A bad architecture is the caller's error too, not gpumem.Error
    # (which ValueError is not).
    for arch in ("sm_1", "vax", "compute_9000", "sm_90b", ""):
        exc = raises(ValueError, gpumem.jit, SCALE, "scale", SCALE_SIG,
                     arch=arch, match="not an architecture")
        assert not isinstance(exc, gpumem.Error), exc


@case
def bad_arguments_before_nvrtc():
    """Without NVRTC, bad arguments are still ValueError; a good call is
    gpumem.Error saying NVRTC is missing."""
    proc = subprocess.run(
        [gmtest.GPUMEM, "-q", "--backend=host", "-c",
         "import gpumem, sys\n"
         "src, sig = sys.argv[1], sys.argv[2]\n"
         "for arch, s in (('vax', sig), ('compute_90', 'int64 *n'),\n"
         "                ('compute_90', sig)):\n"
         "    try:\n"
         "        gpumem.jit(src, 'scale', s, arch=arch)\n"
         "    except Exception as e:\n"
         "        print(type(e).__name__, isinstance(e, gpumem.Error),\n"
         "              'not available' in str(e)\n"
         "              and \"pip install 'gpumem[jit]'\" in str(e))\n",
         SCALE, SCALE_SIG],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, GPUMEM_NVRTC="/no/such/libnvrtc.so"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "ValueError False False", "ValueError False False",
        "Error True True"], proc.stdout


@case
def host_backend_refuses_clearly():
    if CUDA:
        gmtest.skip("the host backend's refusal (the cuda backend launches)")
    # Said at jit() time, without arch=; with it, the function says so.
    raises(gpumem.Error, gpumem.jit, fresh("noarch"), "scale", SCALE_SIG,
           match="give arch= (such as 'compute_90') to compile and check "
                 "the kernel only")
    f = gpumem.jit(SCALE, "scale", SCALE_SIG, arch="compute_90")
    assert "host backend cannot launch it" in f.__doc__, f.__doc__
    x = gpumem.zeros(4)
    raises(gpumem.Error, f, 4, 2.0, x, match="cannot launch JIT kernels")
    # The argument checks still come first.
    raises(TypeError, f, 4, 2.0, gpumem.zeros(4, "int32"),
           match="must hold float32")
    raises(ValueError, f, 5, 2.0, x, match="needs at least 5")


CPP = r"""
struct __half { unsigned short bits; };
__global__ void axpy(long long n, float a, const float *x, float *y) { }
__global__ void halve(int n, __half *x) { }
template <typename T> __global__ void fill(int n, T v, T *y) { }
namespace lib { __global__ void dot(int n, const double *a,
                                    const double *b, double *out) { } }
"""


@case
def signature_checked_against_the_kernel():
    """A C++ kernel's lowered (mangled) name gives its parameters: a
    signature of another count, dtype, scalar size or const-ness is
    refused at jit() time, on either backend (NVRTC needs no GPU)."""
    src = f"// {gmtest.rng.integers(2**62)}\n" + CPP
    good = {
        "axpy": "int64 n, float32 a, in float32 *x[n], inout float32 *y[n]",
        "halve": "int32 n, float16 *x[n]",
        "fill<double>": "int32 n, float64 v, out float64 *y[n]",
        "fill<int>": "int32 n, int32 v, out int32 *y[n]",
        "lib::dot": "int32 n, in float64 *a[n], const float64 *b[n], "
                    "out float64 *out[1]",
    }
    for name, sig in good.items():
        gpumem.jit(src, name, sig, arch="compute_90")
    # A non-const pointer may still be declared in: a promise the
    # signature makes.
    gpumem.jit(src, "axpy", "int64 n, float32 a, in float32 *x[n], "
               "in float32 *y[n]", arch="compute_90")
    bad = [
        # count
        ("axpy", "int64 n, float32 a, in float32 *x[n]",
         "lists 3 parameters but the kernel (_Z4axpyxfPKfPf) takes 4"),
        ("axpy", "int64 n, float32 a, in float32 *x[n], float32 *y[n], "
         "int32 m", "lists 5 parameters"),
        # a scalar's size: int for long long
        ("axpy", "int32 n, float32 a, in float32 *x[n], float32 *y[n]",
         "parameter 0 ('n') is int32 in the signature, but the kernel "
         "(_Z4axpyxfPKfPf) takes int64"),
        ("axpy", "int64 n, float64 a, in float32 *x[n], float32 *y[n]",
         "takes float32: another dtype"),
        # an array's dtype
        ("axpy", "int64 n, float32 a, in float64 *x[n], float32 *y[n]",
         "parameter 2 ('x') is in float64 *"),
        ("halve", "int32 n, float32 *x[n]", "takes float16 *"),
        ("fill<double>", "int32 n, float64 v, out float32 *y[n]",
         "(_Z4fillIdEviT_PS0_) takes float64 *"),
        ("fill<int>", "int32 n, int64 v, out int32 *y[n]",
         "parameter 1 ('v') is int64"),
        # const-ness: a const array cannot be written
        ("axpy", "int64 n, float32 a, inout float32 *x[n], float32 *y[n]",
         "takes const float32 *: a const array, which it cannot write"),
        ("lib::dot", "int32 n, in float64 *a[n], out float64 *b[n], "
         "out float64 *out[1]", "parameter 2 ('b') is out float64 *"),
        # a pointer for a scalar and back
        ("axpy", "int64 n, float32 *a[n], in float32 *x[n], float32 *y[n]",
         "a scalar for an array"),
        ("halve", "int32 n, int64 x", "a pointer for a scalar"),
    ]
    for name, sig, message in bad:
        raises(ValueError, gpumem.jit, src, name, sig, arch="compute_90",
               match=message)
    # Refused again when the code comes from the disk cache.
    name, sig, message = bad[0]
    before = gpumem.jit_stats()
    raises(ValueError, gpumem.jit, src, name, sig, arch="compute_90",
           match=message)
    d = stats_delta(before)
    assert d["cache_hits"] == 1 and d["compiles"] == 0, d
    # extern "C" kernels show no types: nothing to check from the name
    # (the cuda backend checks the sizes when it loads them).
    gpumem.jit(fresh("externc"), "scale", "int64 n, float32 a",
               arch="compute_90")


@case
def parameter_sizes_checked_on_cuda():
    """The loaded kernel's parameters (cudaFuncGetParamInfo: count and
    sizes) against the signature, for extern "C" kernels too, at jit()
    time."""
    if not CUDA:
        gmtest.skip("loading JIT kernels needs the cuda backend")
    src = fresh("sizes")
    gpumem.jit(src, "scale", SCALE_SIG)
    raises(ValueError, gpumem.jit, src, "scale", "int64 n, float32 a",
           match="lists 2 parameters but the compiled kernel takes 3")
    raises(ValueError, gpumem.jit, src, "scale",
           "int32 n, float32 a, float32 *x[n]",
           match="parameter 0 ('n') is a scalar int32 of 4 bytes in the "
                 "signature, but the compiled kernel's parameter 0 has 8 "
                 "bytes")
    raises(ValueError, gpumem.jit, src, "scale",
           "int64 n, float64 a, float32 *x[n]",
           match="parameter 1 ('a') is a scalar float64 of 8 bytes in the "
                 "signature, but the compiled kernel's parameter 1 has 4 "
                 "bytes")
    raises(ValueError, gpumem.jit, src, "scale",
           "int64 n, float32 a, float32 *x[n], int32 m",
           match="lists 4 parameters but the compiled kernel takes 3")
    # Code for a given architecture is checked when it loads, at its
    # first call, and at every call after that.
    g = gpumem.jit(src, "scale", "int64 n, float32 a", arch="compute_80")
    for _ in range(2):
        raises(ValueError, g, 4, 2.0,
               match="lists 2 parameters but the compiled kernel takes 3")
    # A pointer and an 8-byte scalar have one size: only a C++ kernel's
    # name tells them apart (signature_checked_against_the_kernel).


@case
def launches_on_cuda():
    if not CUDA:
        gmtest.skip("launching JIT kernels needs the cuda backend")
    f = gpumem.jit(SCALE, "scale", SCALE_SIG)
    for n in (0, 1, 1000, 2**20 + 3):
        data = random_array(n + 2, "float32")
        x = gpumem.to_device(data)
        f(n, 1.5, x)
        want = data.copy()
        want[:n] = np.float32(1.5) * want[:n]
        assert np.array_equal(x.copy_to_host(), want), n
    x = gpumem.to_device(np.ones(100, np.float32))
    f(100, 2.0, x, grid=4, block=32)          # covers 128 >= 100
    assert np.array_equal(x.copy_to_host(), np.full(100, 2, np.float32))
    s = gpumem.Stream()
    f(100, 2.0, x, stream=s)
    s.synchronize()
    assert np.array_equal(x.copy_to_host(), np.full(100, 4, np.float32))
    raises(TypeError, f, 100, 2.0, gpumem.zeros(100, "float64"))
    # A C++ template, found by its name expression.
    tmpl = ("template <typename T> __global__ void add(int n, T v, T *y)"
            "{ int i = blockIdx.x * blockDim.x + threadIdx.x;"
            "  if (i < n) y[i] += v; }")
    g = gpumem.jit(tmpl, "add<double>", "int32 n, float64 v, "
                   "inout float64 *y[n]")
    y = gpumem.zeros(10, "float64")
    g(10, 0.25, y)
    assert np.array_equal(y.copy_to_host(), np.full(10, 0.25))
    # PTX for an explicit, older architecture loads too.
    h = gpumem.jit(SCALE, "scale", SCALE_SIG, arch="compute_80")
    h(100, 0.5, x)
    assert np.array_equal(x.copy_to_host(), np.full(100, 2, np.float32))


try:
    gmtest.main()
finally:
    shutil.rmtree(CACHE, ignore_errors=True)
