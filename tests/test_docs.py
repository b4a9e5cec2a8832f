"""The reference in docs/ against the module and the program: every public
name has an autodoc entry in docs/python-api.md (make docs renders its
signature from the stubs and its docstring from the module), of the
directive its kind needs, nothing documented that does not exist, every
public object with a docstring, every option of --help and every
environment variable the sources read in docs/command-line.md (so the
contract cannot drift from the code); the README's commands, its size
and its links, and every source file in docs/source-files.md."""

import os
import pydoc
import re
import subprocess
import types

import gmtest
from gmtest import case

import gpumem

DOCS = os.path.join(gmtest.SRCDIR, "docs")
# An entry: an autodoc directive in a MyST eval-rst block.
ENTRY = re.compile(r"^\.\. (auto\w+):: (gpumem(?:\.\w+)*)\s*$")
# Protocol methods a type defines that users reach by syntax or by other
# libraries; documented like public names.
PROTOCOL = {"__enter__", "__exit__", "__array__", "__dlpack__",
            "__dlpack_device__", "__cuda_array_interface__", "__getitem__",
            "__setitem__", "__len__", "__iter__"}


def read(*parts):
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return f.read()


def documented():
    """{name: autodoc directive} of docs/python-api.md's entries."""
    names = {}
    for line in read(DOCS, "python-api.md").splitlines():
        m = ENTRY.match(line)
        if m:
            assert m.group(2) not in names, f"{m.group(2)} documented twice"
            names[m.group(2)] = m.group(1)
    return names


def resolve(name):
    obj = gpumem
    for part in name.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def public_names():
    names = set()
    for n in dir(gpumem):
        if n.startswith("_"):
            continue
        names.add(f"gpumem.{n}")
        obj = getattr(gpumem, n)
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            for m in vars(obj):
                if not m.startswith("_") or m in PROTOCOL:
                    names.add(f"gpumem.{n}.{m}")
        elif isinstance(obj, types.ModuleType):
            names.update(f"gpumem.{n}.{m}" for m in dir(obj)
                         if not m.startswith("_"))
    return names


def directive_for(name):
    """The autodoc directive NAME's object needs."""
    obj = resolve(name)
    parent = resolve(name.rsplit(".", 1)[0])
    if isinstance(obj, types.ModuleType):
        return "automodule"
    if isinstance(obj, type):
        return ("autoexception" if issubclass(obj, BaseException)
                else "autoclass")
    if isinstance(parent, type):
        return "automethod" if callable(obj) else "autoattribute"
    return "autofunction" if callable(obj) else "autodata"


@case
def every_public_name_is_documented():
    missing = sorted(public_names() - set(documented()))
    assert not missing, f"undocumented in docs/python-api.md: {missing}"


@case
def every_documented_name_exists():
    absent = []
    for name in documented():
        if name.startswith("gpumem.comm") and not hasattr(gpumem, "comm"):
            continue                 # built without MPI
        try:
            resolve(name)
        except AttributeError:
            absent.append(name)
    assert not absent, f"documented but missing: {absent}"


@case
def entries_use_the_directive_of_their_kind():
    wrong = []
    for name, directive in documented().items():
        try:
            want = directive_for(name)
        except AttributeError:
            continue                 # gpumem.comm without MPI
        if directive != want:
            wrong.append(f"{name}: {directive}, not {want}")
    assert not wrong, "\n".join(wrong)


@case
def the_entries_parse():
    """Every line that starts an autodoc directive is an entry; a
    directive the pattern misses would go unchecked."""
    text = read(DOCS, "python-api.md")
    starts = re.findall(r"^\.\. auto\w+::.*$", text, re.M)
    assert len(starts) == len(documented()), [
        line for line in starts if not ENTRY.match(line)]
    assert len(re.findall(r"^```\{eval-rst\}$", text, re.M)) == len(starts)


@case
def every_public_object_has_a_docstring():
    bare = []
    for name in sorted(public_names()):
        obj = resolve(name)
        if isinstance(obj, (int, str, bool)):
            continue                 # values: documented in docs only
        doc = getattr(obj, "__doc__", None)
        if not doc or not doc.strip():
            bare.append(name)
    assert not bare, f"no docstring: {bare}"


@case
def pydoc_renders_the_module():
    text = pydoc.render_doc(gpumem, renderer=pydoc.plaintext)
    for n in dir(gpumem):
        if not n.startswith("_"):
            assert n in text, n
    assert "docs/python-api.md" in gpumem.__doc__
    for cls in (gpumem.DeviceArray, gpumem.Stream, gpumem.Event,
                gpumem.Device):
        text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
        for m in vars(cls):
            if not m.startswith("_"):
                assert m in text, (cls, m)


def help_options():
    out = subprocess.run([gmtest.GPUMEM, "--help"], capture_output=True,
                         text=True, check=True).stdout
    options = set()
    for line in out.splitlines():
        # "  -x, --long", or "      --long" for a long option alone.
        m = re.match(r"^  (?:(-\w)(?:, (--[\w-]+))?|    (--[\w-]+))", line)
        if m:
            options.update(o for o in m.groups() if o)
    return options


def command_line_headings():
    return [line for line in read(DOCS, "command-line.md").splitlines()
            if line.startswith("### ")]


@case
def every_option_is_documented():
    options = help_options()
    assert {"-b", "--backend", "-c", "-m", "-h", "--help"} <= options
    documented_options = set()
    for line in command_line_headings():
        documented_options.update(re.findall(r"`(--?[\w-]+)", line))
    assert options == documented_options, (
        f"only in --help: {sorted(options - documented_options)}; only in "
        f"docs/command-line.md: {sorted(documented_options - options)}")


@case
def every_environment_variable_is_documented():
    read_by_sources = set()
    for path in gmtest.source_files(".c", ".cu", ".h"):
        # A variable's name as a string of its own: what getenv and the
        # settings readers are given.
        read_by_sources.update(re.findall(r'"(GPUMEM_[A-Z0-9_]+)"',
                                          read(path)))
    assert "GPUMEM_BACKEND" in read_by_sources or "GPUMEM_PYTHON" in \
        read_by_sources, read_by_sources
    documented_vars = set()
    for line in command_line_headings():
        documented_vars.update(re.findall(r"`(GPUMEM_\w+)`", line))
    assert read_by_sources <= documented_vars, (
        f"undocumented: {sorted(read_by_sources - documented_vars)}")
    assert documented_vars <= read_by_sources, (
        f"documented, never read: {sorted(documented_vars - read_by_sources)}")


@case
def every_test_script_is_in_the_suite():
    # The suite is declared once, in tests/CTestTestfile.cmake.in, and
    # the distribution takes every tests/*.py (Makefile.am's dist-hook):
    # a test script that file does not name would never run.
    suite = read(gmtest.SRCDIR, "tests", "CTestTestfile.cmake.in")
    named = set(re.findall(r"gm_python_test\(([\w/]+)\)", suite))
    named |= set(re.findall(r"tests/([\w/]+)\.py", suite))
    for block in re.findall(r"foreach\(name ([^)]*)\)", suite):
        named |= set(block.split())
    scripts = {os.path.relpath(path, os.path.join(gmtest.SRCDIR, "tests"))
               [:-len(".py")]
               for path in gmtest.source_files(".py", folders=("tests",))
               if os.path.basename(path).startswith("test_")}
    assert scripts, "no tests/test_*.py found"
    assert scripts <= named, f"not in the suite: {sorted(scripts - named)}"


@case
def readme_and_man_page_point_to_the_docs():
    for f in ("README.md", os.path.join("man", "gpumem.1")):
        text = read(gmtest.SRCDIR, f).replace("\\-", "-")
        for doc in ("docs/python-api.md", "docs/command-line.md"):
            assert doc in text, (f, doc)


def section(text, heading):
    """The lines of TEXT's section HEADING ("## Name"), up to the next
    heading of its level."""
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


@case
def readme_performance_is_a_summary_of_docs_performance():
    readme = read(gmtest.SRCDIR, "README.md")
    perf = read(DOCS, "performance.md")
    short = section(readme, "## Performance")
    assert "docs/performance.md" in short
    assert len(short.splitlines()) <= 30, "README's Performance: move detail to docs/performance.md"
    # The README's figures are docs/performance.md's: every number in its
    # table appears there too.
    rows = [line for line in short.splitlines()
            if line.startswith("| ") and not line.startswith("| ---")][1:]
    assert rows, "README's Performance has no table"
    for row in rows:
        for figure in re.findall(r"\d[\d.]* (?:us|GB/s)", row):
            assert figure in perf, f"README's {figure} not in docs/performance.md"
    for name in ("make bench", "## The targets", "bench/NOTES.md"):
        assert name in perf, name
    # Said for a newcomer: the card, no run letters, commits or issues.
    assert "H200" in short, "README's Performance does not say which card"
    for shorthand in (r"\brun [A-Z]\b", r"\bruns? [A-Z](?:, [A-Z])*\b",
                      r"\b[0-9a-f]{7,40}\b", r"\bissues? \d"):
        assert not re.search(shorthand, short), \
            f"README's Performance speaks in shorthand: {shorthand}"


@case
def readme_says_what_a_newcomer_needs():
    """The version, what the CUDA backend needs and builds for, the
    license and where to report bugs."""
    readme = read(gmtest.SRCDIR, "README.md")
    version = re.search(r"AC_INIT\(\[gpumem\],\s*\[([^\]]+)\]",
                        read(gmtest.SRCDIR, "configure.ac")).group(1)
    assert f"gpumem {version}" in readme, version
    for needed in ("CUDA toolkit", "sm_90", "--with-cuda-arch",
                   "Python 3.9", "LICENSE", "## Reporting bugs",
                   "PYTHONPATH=src/.libs", "pip install .",
                   "make install"):
        assert needed in readme, f"README.md does not say {needed!r}"
    assert os.path.isfile(os.path.join(gmtest.SRCDIR, "LICENSE"))


@case
def cited_reports_exist():
    results = os.path.join(gmtest.SRCDIR, "bench", "results")
    if not os.path.isdir(results):
        gmtest.skip("bench/results is not in this tree (a release tarball)")
    # The current figures' reports, and NOTES.md's list of the current
    # ones (its history cites older reports, which git keeps).
    current = section(read(gmtest.SRCDIR, "bench", "NOTES.md"),
                      "## The current reports (bench/results/)")
    cited = set(re.findall(r"`([\w.-]+\.md)`", current))
    for f in ("README.md", os.path.join("docs", "performance.md")):
        cited.update(re.findall(r"bench/results/([\w.-]+\.md)",
                                read(gmtest.SRCDIR, f)))
    assert cited, "no report cited"
    missing = sorted(n for n in cited
                     if not os.path.exists(os.path.join(results, n)))
    assert not missing, f"cited but not in bench/results: {missing}"
    # Every report kept is one of the current ones NOTES.md lists.
    unlisted = sorted(n for n in os.listdir(results)
                      if n.endswith(".md") and n not in current)
    assert not unlisted, f"reports not in NOTES' current reports: {unlisted}"


def readme_sh_blocks():
    """The README's ```sh blocks, in order (.ci/run runs the second)."""
    return re.findall(r"^```sh\n(.*?)^```", read(gmtest.SRCDIR, "README.md"),
                      re.M | re.S)


@case
def readme_starts_with_the_build_and_check_commands():
    blocks = readme_sh_blocks()
    assert len(blocks) >= 2
    assert blocks[0].rstrip().endswith("./src/gpumem scripts/stitching.py")
    assert blocks[1].rstrip().endswith('make -j"$(nproc)" check')
    # .ci/run counts fences of any kind: the second fenced block is the
    # one it runs.
    fence, ci_command = 0, []
    for line in read(gmtest.SRCDIR, "README.md").splitlines():
        if line.startswith("```"):
            fence += 1
        elif fence == 3:
            ci_command.append(line)
    assert "\n".join(ci_command).strip() == blocks[1].strip(), ci_command


def steps(command):
    """The steps of a one-line command joined by &&, a { ...; } group
    read as its content."""
    return [re.sub(r"^\{ (.*); \}$", r"\1", step.strip())
            for step in command.strip().split(" && ")]


@case
def readme_shows_the_commands_one_step_a_line():
    """The readable copy of the two commands (.ci/run reads the one-line
    ones) says what they say: the first command's steps one a line, then
    the second's last step."""
    blocks = readme_sh_blocks()
    run, check = steps(blocks[0]), steps(blocks[1])
    # run ends: build, run the job; check: build and check in one step.
    assert check[:-1] == run[:-2], "the two commands set up differently"
    readable = [b for b in blocks[2:] if "\nautoreconf -fi\n" in "\n" + b]
    assert readable, "README.md shows the commands only on one line"
    lines = []
    for line in readable[0].replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#.*$", "", re.sub(r"\s+", " ", line)).strip()
        if line:
            lines.append(line)
    assert lines == run + check[-1:], (lines, run + check[-1:])


@case
def readme_is_a_front_door():
    readme = read(gmtest.SRCDIR, "README.md")
    assert len(readme.splitlines()) <= 200, "README.md: move detail to docs/"
    pages = re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme)
    for page in ("docs/install.md", "docs/mpi.md", "docs/python-api.md",
                 "docs/source-files.md"):
        assert page in pages, f"README.md does not link {page}"
    missing = sorted(p for p in set(pages)
                     if not os.path.exists(os.path.join(gmtest.SRCDIR, p)))
    assert not missing, f"README.md links pages that do not exist: {missing}"


@case
def readme_example_runs_and_prints():
    """The README's Python example runs as shown (./src/gpumem
    example.py) and prints its three partial updates."""
    blocks = re.findall(r"^```python\n(.*?)^```",
                        read(gmtest.SRCDIR, "README.md"), re.M | re.S)
    assert blocks, "README.md has no Python example"
    got = subprocess.run([gmtest.GPUMEM, f"--backend={gpumem.backend}",
                          "-q", "-c", blocks[0]], capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 0, (got.stdout, got.stderr)
    lines = got.stdout.splitlines()
    assert [l.split(":")[0] for l in lines] == [
        f"iteration {i}" for i in range(3)], got.stdout


def makefile_list(variable):
    """The words of VARIABLE's assignments (= and +=) in Makefile.am and
    the local.mk files, continuation lines joined."""
    words = []
    for path in [os.path.join(gmtest.SRCDIR, "Makefile.am")] + \
            gmtest.source_files("local.mk"):
        text = read(path).replace("\\\n", " ")
        for m in re.finditer(rf"^{variable} \+?= (.*)$", text, re.M):
            words += m.group(1).split()
    return words


def installed_examples():
    """The example scripts and programs an installed gpumem has: what
    make install puts in PREFIX/share/gpumem (Makefile.am's
    dist_scripts_DATA, nobase_dist_example_DATA), which the wheel takes
    by the same install rules."""
    return set(makefile_list("dist_scripts_DATA")
               + makefile_list("nobase_dist_example_DATA"))


# A doc's reference to an example file: scripts/NAME.EXT or
# examples/.../NAME.EXT, not a glob.
EXAMPLE_PATH = re.compile(r"(?<![\w/.-])((?:scripts|examples)/[\w./-]*\w\.\w+)")


def unshipped(text, installed):
    """The example files TEXT names that INSTALLED lacks."""
    return sorted({p for p in EXAMPLE_PATH.findall(text.replace("\\-", "-"))
                   if p not in installed})


@case
def docs_name_only_files_the_installed_package_has():
    """A page that tells a user to run scripts/X.py or build examples/Y
    names a file that make install and pip install both install."""
    installed = installed_examples()
    assert "scripts/interop.py" in installed and \
        "examples/run-examples.sh" in installed, installed
    # The check itself catches a file that is not shipped.
    assert unshipped("run `gpumem scripts/not_shipped.py`", installed) == \
        ["scripts/not_shipped.py"]
    backend = read(gmtest.SRCDIR, "pep517", "gpumem_build.py")
    for rule in ("install-dist_scriptsDATA",
                 "install-nobase_dist_exampleDATA"):
        assert rule in backend, f"the wheel does not run make {rule}"
    pages = ["README.md"] + [os.path.join("docs", n)
                             for n in sorted(os.listdir(DOCS))
                             if n.endswith(".md")]
    pages += [os.path.join("man", n)
              for n in sorted(os.listdir(os.path.join(gmtest.SRCDIR, "man")))
              if re.search(r"\.\d$", n)]
    missing = {page: unshipped(read(gmtest.SRCDIR, page), installed)
               for page in pages}
    missing = {page: names for page, names in missing.items() if names}
    assert not missing, f"docs name files the installed package lacks: {missing}"


@case
def gitignore_covers_what_the_build_makes():
    """Every program, fuzz target and cleaned file the build makes in an
    in-place build is ignored by .gitignore (git status stays clean
    after make check)."""
    import shutil
    if shutil.which("git") is None or not os.path.exists(
            os.path.join(gmtest.SRCDIR, ".git")):
        gmtest.skip("not a git checkout, or no git")
    made = set()
    for variable in ("check_PROGRAMS", "bin_PROGRAMS", "FUZZ_TARGETS",
                     "CLEANFILES", "MOSTLYCLEANFILES"):
        made.update(w for w in makefile_list(variable)
                    if "$" not in w and "*" not in w)
    made.add("tests/fuzz/fuzz-length")
    assert "tests/reduce-test" in made and "src/gpumem" in made, made
    got = subprocess.run(["git", "-C", gmtest.SRCDIR, "check-ignore",
                          "--no-index", "-v", "-n", "--stdin"],
                         input="\n".join(sorted(made)) + "\n",
                         capture_output=True, text=True, timeout=60)
    missed = sorted(line.split("\t", 1)[1] for line in got.stdout.splitlines()
                    if line.startswith("::"))
    assert not missed, f".gitignore misses built files: {missed}"


def built_files():
    """The files the build makes in src/ (nodist_ sources of a local.mk),
    which an in-place build leaves beside the sources."""
    made = set()
    for path in gmtest.source_files("local.mk"):
        for m in re.finditer(r"^nodist_\w+ \+?= (.*)$", read(path), re.M):
            made.update(m.group(1).split())
    return made


@case
def source_files_page_names_every_source_file():
    """docs/source-files.md names every file of src/ and kernels/ under
    the heading of its folder, and only files that exist."""
    text = read(DOCS, "source-files.md")
    tree = {os.path.relpath(p, gmtest.SRCDIR)
            for p in gmtest.source_files(".c", ".cu", ".h", ".py", ".pyi",
                                         ".def", ".in", "local.mk", "README")}
    tree -= built_files()
    assert "src/core/gm.h" in tree and "kernels/kernels.def" in tree, tree
    named, misplaced = set(), []
    folder = None
    for line in text.splitlines():
        m = re.match(r"^## `([\w/-]+)/`", line)
        if m:
            folder = m.group(1)
            continue
        if line.startswith("## "):
            folder = None
        m = re.match(r"^- ((?:`[^`]+`(?:, )?)+): ", line)
        if not m:
            continue
        for path in re.findall(r"`([^`]+)`", m.group(1)):
            if path.startswith(("src/", "kernels/")):
                named.add(path)
                if folder is None or not (
                        os.path.dirname(path) == folder
                        or path.startswith(folder + "/gpumem-stubs/")):
                    misplaced.append(path)
    missing = sorted(tree - named)
    assert not missing, f"not in docs/source-files.md: {missing}"
    absent = sorted(p for p in named
                    if not os.path.exists(os.path.join(gmtest.SRCDIR, p)))
    assert not absent, f"docs/source-files.md names files not in the tree: {absent}"
    assert not misplaced, f"listed outside their folder's section: {misplaced}"


gmtest.main()
