"""test_cli.py -- the gpumem command line: options, exit codes, sys.argv,
sys.path, standard input, signals, environment, and the man page.

Runs under gpumem (tests/gm-test.sh host tests/test_cli.py) and starts the
product binary (gmtest.GPUMEM) in subprocesses.  Where the answer depends
on whether a CUDA device answers, both branches assert.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import gmtest

GPUMEM = gmtest.GPUMEM
TIMEOUT = 60

# The options docs/command-line.md names, short and long.
OPTIONS = ["-b", "--backend", "-c", "-m", "-i", "-l", "--list-devices",
           "-k", "--list-kernels", "-s", "--stats", "-q", "--quiet",
           "-h", "--help", "-V", "--version"]

# Prints what a child sees, as one JSON line.
PROBE = ("import gpumem, json, sys; print(json.dumps({'argv': sys.argv, "
         "'path0': sys.path[0], 'backend': gpumem.backend}))")


def child_env(backend=None, **extra):
    """The environment of a child: ours without gpumem's own variables,
    GPUMEM_BACKEND=BACKEND when given, and EXTRA (None removes)."""
    env = dict(os.environ)
    for name in ("GPUMEM_BACKEND", "GPUMEM_PYTHON", "GPUMEM_HOST_DEVICES",
                 "PYTHONINSPECT"):
        env.pop(name, None)
    if backend is not None:
        env["GPUMEM_BACKEND"] = backend
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def gpumem(*args, env=None, input=None, cwd=None, timeout=TIMEOUT):
    """Runs gpumem ARGS and returns the CompletedProcess (text)."""
    if env is None:
        env = child_env("host")
    return subprocess.run([GPUMEM, *args], env=env, input=input, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=None if input is not None
                          else subprocess.DEVNULL)


def show(proc):
    """PROC's status and output, for assertion messages."""
    return (f"exit {proc.returncode}\nstdout: {proc.stdout!r}\n"
            f"stderr: {proc.stderr!r}")


def probe(proc):
    """The JSON line PROBE printed in PROC."""
    assert proc.returncode == 0, show(proc)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    assert len(lines) == 1, show(proc)
    return json.loads(lines[0])


_cuda = None


def cuda_available():
    """Whether --backend=cuda starts here (asked once)."""
    global _cuda
    if _cuda is None:
        proc = gpumem("--backend=cuda", "-q", "-c", "pass",
                      env=child_env(None))
        assert proc.returncode in (0, 3), show(proc)
        _cuda = proc.returncode == 0
    return _cuda


def help_options(text):
    """The -x and --long options in the option lines of --help TEXT."""
    found = []
    for line in text.splitlines():
        m = re.match(r"\s+(-\w)(?:,\s+(--[\w-]+))?", line)
        if m:
            found.extend(o for o in m.groups() if o)
    return found


def usage_error(proc, *words):
    """Asserts PROC was a usage error whose message has WORDS."""
    assert proc.returncode == 2, show(proc)
    assert "Try 'gpumem --help'" in proc.stderr, show(proc)
    assert proc.stdout == "", show(proc)
    for word in words:
        assert word in proc.stderr, f"{word!r} missing: " + show(proc)


# --- --help, --version, usage errors ------------------------------------

@gmtest.case
def test_help_lists_every_option():
    for flag in ("--help", "-h"):
        proc = gpumem(flag)
        assert proc.returncode == 0, show(proc)
        assert proc.stdout.startswith("Usage: gpumem"), show(proc)
        listed = help_options(proc.stdout)
        for option in OPTIONS:
            assert option in listed, f"{flag} lacks {option}: {listed}"
        for word in ("GPUMEM_BACKEND", "GPUMEM_PYTHON",
                     "GPUMEM_HOST_DEVICES", "CUDA_VISIBLE_DEVICES"):
            assert word in proc.stdout, f"{flag} lacks {word}"


@gmtest.case
def test_version():
    for flag in ("-V", "--version"):
        proc = gpumem(flag)
        assert proc.returncode == 0, show(proc)
        assert re.match(r"gpumem \d+\.\d+(\.\d+)?\b", proc.stdout), show(proc)
        version = "%d.%d" % sys.version_info[:2]
        assert f"Python {version}" in proc.stdout, show(proc)
        assert len(proc.stdout.splitlines()) == 1, show(proc)


@gmtest.case
def test_unknown_option():
    usage_error(gpumem("--bogus", "-c", "pass"), "--bogus")
    usage_error(gpumem("-Z", "-c", "pass"), "-Z")


@gmtest.case
def test_missing_argument():
    usage_error(gpumem("-c"), "-c", "argument")
    usage_error(gpumem("-m"), "-m", "argument")
    usage_error(gpumem("-b"), "-b", "argument")
    # (The message may name the option by either spelling.)
    usage_error(gpumem("--backend"), "argument")


@gmtest.case
def test_bad_backend():
    usage_error(gpumem("--backend=gpu", "-c", "pass"), "gpu")
    usage_error(gpumem("-b", "nope", "-c", "pass"), "nope")
    usage_error(gpumem("--backend=", "-c", "pass"))


@gmtest.case
def test_bad_backend_environment():
    proc = gpumem("-c", "pass", env=child_env("bogus"))
    usage_error(proc, "GPUMEM_BACKEND", "bogus")


# --- backends --------------------------------------------------------------

@gmtest.case
def test_backend_host():
    assert probe(gpumem("--backend=host", "-q", "-c", PROBE,
                        env=child_env(None)))["backend"] == "host"
    assert probe(gpumem("-b", "host", "-q", "-c", PROBE,
                        env=child_env("cuda")))["backend"] == "host", \
        "--backend must win over GPUMEM_BACKEND"
    assert probe(gpumem("-q", "-c", PROBE,
                        env=child_env("host")))["backend"] == "host"


@gmtest.case
def test_backend_cuda():
    proc = gpumem("--backend=cuda", "-c", PROBE, env=child_env(None))
    if cuda_available():
        assert probe(proc)["backend"] == "cuda"
        assert proc.stderr == "", show(proc)
    else:
        assert proc.returncode == 3, show(proc)
        assert proc.stdout == "", show(proc)
        assert "CUDA" in proc.stderr and "unavailable" in proc.stderr, \
            show(proc)
        # Never silently the host backend, -q or not.
        proc = gpumem("-q", "-c", PROBE, env=child_env("cuda"))
        assert proc.returncode == 3, show(proc)
        assert proc.stderr.startswith("gpumem: "), show(proc)


@gmtest.case
def test_backend_auto_notice():
    for args in (["-c", PROBE], ["--backend=auto", "-c", PROBE]):
        loud = gpumem(*args, env=child_env(None))
        quiet = gpumem("-q", *args, env=child_env(None))
        for proc in (loud, quiet):
            assert probe(proc)["backend"] == \
                ("cuda" if cuda_available() else "host")
        assert quiet.stderr == "", show(quiet)
        if cuda_available():
            assert loud.stderr == "", show(loud)
        else:
            lines = loud.stderr.splitlines()
            assert len(lines) == 1, show(loud)
            assert lines[0].startswith("gpumem: ") and "host" in lines[0], \
                show(loud)


# --- what the script sees ------------------------------------------------

@gmtest.case
def test_command_argv():
    seen = probe(gpumem("-q", "-c", PROBE, "a", "b"))
    assert seen["argv"] == ["-c", "a", "b"], seen
    # Options after COMMAND belong to it.
    seen = probe(gpumem("-q", "-c", PROBE, "-V", "--help"))
    assert seen["argv"] == ["-c", "-V", "--help"], seen


@gmtest.case
def test_script_argv_and_path():
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "probe_script.py")
        with open(script, "w") as f:
            f.write(PROBE + "\n")
        with tempfile.TemporaryDirectory() as elsewhere:
            seen = probe(gpumem("-q", script, "x", "-y", "--z",
                                cwd=elsewhere))
        assert seen["argv"] == [script, "x", "-y", "--z"], seen
        assert os.path.realpath(seen["path0"]) == os.path.realpath(folder), \
            seen
        # A relative path: argv[0] as given, sys.path[0] its folder.
        seen = probe(gpumem("-q", "probe_script.py", cwd=folder))
        assert seen["argv"] == ["probe_script.py"], seen
        assert os.path.realpath(seen["path0"]) == os.path.realpath(folder), \
            seen


@gmtest.case
def test_script_imports_beside_it():
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "helper_beside.py"), "w") as f:
            f.write("VALUE = 41\n")
        script = os.path.join(folder, "main_script.py")
        with open(script, "w") as f:
            f.write("import helper_beside; print(helper_beside.VALUE + 1)\n")
        with tempfile.TemporaryDirectory() as elsewhere:
            proc = gpumem("-q", script, cwd=elsewhere)
        assert proc.returncode == 0 and proc.stdout == "42\n", show(proc)


@gmtest.case
def test_missing_script():
    proc = gpumem("-q", "/nonexistent/folder/script.py")
    assert proc.returncode not in (0, 3), show(proc)
    assert "script.py" in proc.stderr, show(proc)


@gmtest.case
def test_module():
    with tempfile.TemporaryDirectory() as folder:
        module = os.path.join(folder, "gm_cli_probe_module.py")
        with open(module, "w") as f:
            f.write(PROBE + "\n")
        path = os.pathsep.join(
            p for p in (folder, os.environ.get("PYTHONPATH")) if p)
        with tempfile.TemporaryDirectory() as elsewhere:
            seen = probe(gpumem("-q", "-m", "gm_cli_probe_module", "a", "-b",
                                env=child_env("host", PYTHONPATH=path),
                                cwd=elsewhere))
        assert os.path.realpath(seen["argv"][0]) == os.path.realpath(module), \
            seen
        assert seen["argv"][1:] == ["a", "-b"], seen
    proc = gpumem("-q", "-m", "gm_cli_no_such_module")
    assert proc.returncode == 1, show(proc)
    assert "gm_cli_no_such_module" in proc.stderr, show(proc)


@gmtest.case
def test_dash_reads_stdin():
    seen = probe(gpumem("-q", "-", "x", "y", input=PROBE + "\n"))
    assert seen["argv"] == ["-", "x", "y"], seen


@gmtest.case
def test_piped_stdin():
    seen = probe(gpumem("-q", input=PROBE + "\n"))
    assert seen["argv"] == [""], seen
    proc = gpumem("-q", input="import sys\nprint(6 * 7)\nsys.exit(4)\n")
    assert proc.returncode == 4 and proc.stdout == "42\n", show(proc)


# --- exit status -----------------------------------------------------------

@gmtest.case
def test_uncaught_exception():
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "raises.py")
        with open(script, "w") as f:
            f.write("def f():\n    raise ValueError('boom 17')\nf()\n")
        proc = gpumem("-q", script)
    assert proc.returncode == 1, show(proc)
    assert "Traceback (most recent call last)" in proc.stderr, show(proc)
    assert "ValueError: boom 17" in proc.stderr, show(proc)
    assert "raises.py" in proc.stderr, show(proc)


@gmtest.case
def test_system_exit_codes():
    proc = gpumem("-q", "-c", "import sys; sys.exit(7)")
    assert proc.returncode == 7 and proc.stderr == "", show(proc)
    proc = gpumem("-q", "-c", "raise SystemExit(0)")
    assert proc.returncode == 0, show(proc)
    proc = gpumem("-q", "-c", "import sys; sys.exit('bad thing 99')")
    assert proc.returncode == 1, show(proc)
    assert "bad thing 99" in proc.stderr, show(proc)
    assert "Traceback" not in proc.stderr, show(proc)
    proc = gpumem("-q", "-c", "import sys; sys.exit(None)")
    assert proc.returncode == 0 and proc.stderr == "", show(proc)
    proc = gpumem("-q", "-c", "import sys; sys.exit()")
    assert proc.returncode == 0 and proc.stderr == "", show(proc)


@gmtest.case
def test_inspect_after_command():
    # -i: the command runs, then the console reads standard input (not a
    # terminal here) with the command's globals, as python -i does.
    proc = gpumem("-q", "-i", "-c", "x = 5; print('command ran')",
                  input="print('stdin ran', x * 2)\n")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["command ran", "stdin ran 10"], \
        show(proc)


@gmtest.case
def test_ctrl_c():
    got = gmtest.interrupt([GPUMEM, "-q", "-c",
                            'import time; print("ready", flush=True); '
                            'time.sleep(30)'], env=child_env("host"))
    gmtest.assert_interrupted(got)


@gmtest.case
def test_ctrl_c_while_waiting_on_gpu():
    # The test build's spin kernel keeps the GPU busy for 20 s.
    if not cuda_available():
        gmtest.skip("no CUDA device answers")
    if gmtest.GPUMEM_TEST == GPUMEM \
       or not os.access(gmtest.GPUMEM_TEST, os.X_OK):
        gmtest.skip("no gpumem-test (GPUMEM_TEST) with the spin kernel")
    command = ("import gpumem; out = gpumem.zeros(1, dtype='int32'); "
               "print('ready', flush=True); "
               "gpumem.kernels.spin(20000, out)")
    # (The traceback names the line of the script; a C function such as
    # the kernel has no frame of its own.)
    gmtest.assert_interrupted(gmtest.interrupt(
        [gmtest.GPUMEM_TEST, "-q", "-c", command], env=child_env("cuda"),
        delay=1.0))


# --- listings and statistics ---------------------------------------------

def device_lines(text):
    return [l for l in text.splitlines() if re.match(r"\d+\s", l)]


@gmtest.case
def test_list_devices():
    proc = gpumem("--backend=host", "-l",
                  env=child_env(None, GPUMEM_HOST_DEVICES="3"))
    assert proc.returncode == 0, show(proc)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("backend: host (3 simulated devices"), \
        show(proc)
    assert "index" in lines[1] and "name" in lines[1], show(proc)
    devices = device_lines(proc.stdout)
    assert len(devices) == 3, show(proc)
    assert [int(l.split()[0]) for l in devices] == [0, 1, 2], show(proc)
    assert len(lines) == 2 + 3, show(proc)
    # No compute capability shown as if real: the devices are simulated.
    for line in devices:
        assert line.endswith("none (simulated)"), show(proc)
        assert not re.search(r"\d\.\d$", line), show(proc)
    proc = gpumem("--list-devices", "-b", "host", env=child_env(None))
    assert proc.returncode == 0, show(proc)
    assert len(device_lines(proc.stdout)) == 4, show(proc)
    if cuda_available():
        proc = gpumem("-l", "-b", "cuda", env=child_env(None))
        assert proc.returncode == 0, show(proc)
        assert proc.stdout.startswith("backend: cuda\n"), show(proc)
        assert len(device_lines(proc.stdout)) >= 1, show(proc)


@gmtest.case
def test_bad_host_devices():
    for value in ("0", "abc", "65", "-1", "3x"):
        proc = gpumem("--backend=host", "-q", "-c", "pass",
                      env=child_env(None, GPUMEM_HOST_DEVICES=value))
        assert proc.returncode == 3, f"{value}: " + show(proc)
        assert "GPUMEM_HOST_DEVICES" in proc.stderr, show(proc)
    proc = gpumem("--backend=host", "-l",
                  env=child_env(None, GPUMEM_HOST_DEVICES="0"))
    assert proc.returncode == 3 and proc.stdout == "", show(proc)
    for value in ("1", "64"):
        proc = gpumem("--backend=host", "-q", "-c",
                      "import gpumem; print(gpumem.device_count())",
                      env=child_env(None, GPUMEM_HOST_DEVICES=value))
        assert proc.returncode == 0 and proc.stdout == value + "\n", \
            show(proc)


@gmtest.case
def test_settings_take_only_their_documented_spellings():
    # docs/command-line.md: GPUMEM_HOST_DEVICES is a count (digits
    # only), GPUMEM_COMM_TIMEOUT seconds (digits, a decimal point
    # allowed); strtol and strtod took a sign, spaces, hex and exponents.
    for value in (" 4", "+4", "4 ", "0x4", "4K", "04.0"):
        proc = gpumem("--backend=host", "-q", "-c", "pass",
                      env=child_env(None, GPUMEM_HOST_DEVICES=value))
        assert proc.returncode == 3, f"{value!r}: " + show(proc)
        assert f"GPUMEM_HOST_DEVICES='{value}' is not a count" \
            in proc.stderr, show(proc)
    proc = gpumem("--backend=host", "-q", "-c",
                  "import gpumem; print(gpumem.device_count())",
                  env=child_env(None, GPUMEM_HOST_DEVICES="007"))
    assert proc.returncode == 0 and proc.stdout == "7\n", show(proc)
    for value in ("1e2", " 5", "+5", "0x10", "5s", "inf", "1.", ".5",
                  "604801", "99999999999999999999"):
        proc = gpumem("-q", "-c", "pass",
                      env=child_env("host", GPUMEM_COMM_TIMEOUT=value))
        assert proc.returncode == 3, f"{value!r}: " + show(proc)
        assert f"GPUMEM_COMM_TIMEOUT='{value}'" in proc.stderr \
            and "seconds" in proc.stderr, show(proc)
    for value in ("0", "0.001", "2.5", "604800"):
        proc = gpumem("-q", "-c", "pass",
                      env=child_env("host", GPUMEM_COMM_TIMEOUT=value))
        assert proc.returncode == 0, f"{value!r}: " + show(proc)


@gmtest.case
def test_list_kernels():
    import gpumem as gm
    for flag in ("-k", "--list-kernels"):
        proc = gpumem(flag)
        assert proc.returncode == 0, show(proc)
        lines = proc.stdout.splitlines()
        signatures = [l for l in lines if not l.startswith(" ")]
        names = [s.split("(")[0] for s in signatures]
        for name in ("algo_seed", "algo", "saxpy"):
            assert name in names, show(proc)
        for name in ("fault", "spin"):
            assert name not in names, f"test kernel {name}: " + show(proc)
        # Each kernel's line is the signature kernels.list() gives, and a
        # documentation line follows it.
        assert sorted(signatures) == sorted(s for _, s in gm.kernels.list()), \
            show(proc)
        for i, line in enumerate(lines):
            if not line.startswith(" "):
                assert i + 1 < len(lines) and lines[i + 1].startswith("    "), \
                    show(proc)
    assert ("algo_seed(images: float32[number_of_images] in, "
            "update: float32[4] in, partial_update: float32[4] out, "
            "number_of_images: int64)") in signatures
    assert ("saxpy(n: int64, a: float32, x: float32[n] in, "
            "y: float32[n] inout)") in signatures
    # Listing needs no device.
    proc = gpumem("-b", "host", "-k",
                  env=child_env(None, GPUMEM_HOST_DEVICES="0"))
    assert proc.returncode == 0 and "saxpy(" in proc.stdout, show(proc)


@gmtest.case
def test_stats():
    command = ("import gpumem; a = gpumem.empty(1000, dtype='uint8', "
               "device=1); b = gpumem.empty(10, dtype='float32'); b.free()")
    proc = gpumem("-q", "-s", "-c", command,
                  env=child_env("host", GPUMEM_HOST_DEVICES="2"))
    assert proc.returncode == 0, show(proc)
    assert proc.stdout == "", show(proc)
    lines = proc.stderr.splitlines()
    assert "memory statistics" in lines[0] and "host" in lines[0], show(proc)
    assert "peak" in lines[1], show(proc)
    rows = device_lines(proc.stderr)
    assert len(rows) == 2, show(proc)
    assert "40 B" in rows[0] and rows[0].split()[-1] == "1", show(proc)
    assert "1000 B" in rows[1] and rows[1].split()[-1] == "1", show(proc)
    # --stats also after a failing script; none without the option.
    proc = gpumem("-q", "--stats", "-c", "raise ValueError")
    assert proc.returncode == 1 and "memory statistics" in proc.stderr, \
        show(proc)
    proc = gpumem("-q", "-c", command)
    assert proc.returncode == 0 and proc.stderr == "", show(proc)


@gmtest.case
def test_stats_after_system_exit():
    # "At exit" includes an exit through SystemExit, whatever its code.
    for code in ("3", "0", "None", "'message'"):
        proc = gpumem("-q", "-s", "-c", f"import sys; sys.exit({code})")
        assert "memory statistics" in proc.stderr, \
            f"sys.exit({code}): " + show(proc)


# --- the Python environment ---------------------------------------------

@gmtest.case
def test_python_nonexistent():
    proc = gpumem("-q", "-c", "pass",
                  env=child_env("host", GPUMEM_PYTHON="/nonexistent/python3"))
    usage_error(proc, "GPUMEM_PYTHON", "/nonexistent/python3")
    with tempfile.TemporaryDirectory() as folder:
        proc = gpumem("-q", "-c", "pass",
                      env=child_env("host", GPUMEM_PYTHON=folder))
        usage_error(proc, "GPUMEM_PYTHON")


@gmtest.case
def test_python_same_interpreter():
    # Ours, as an interpreter path and (in a virtual environment) as the
    # environment's folder.
    choices = [sys.executable]
    if sys.prefix != sys.base_prefix:
        choices.append(sys.prefix)
    command = ("import sys, numpy, gpumem; "
               "print(sys.version_info[:2], numpy.__version__)")
    import numpy
    expected = f"{tuple(sys.version_info[:2])} {numpy.__version__}\n"
    for python in choices:
        proc = gpumem("-q", "-c", command,
                      env=child_env("host", GPUMEM_PYTHON=python))
        assert proc.returncode == 0 and proc.stdout == expected, \
            f"GPUMEM_PYTHON={python}: " + show(proc)


@gmtest.case
def test_python_venv_folder():
    # A virtual environment made from our interpreter, given by folder:
    # its prefix becomes sys.prefix.
    with tempfile.TemporaryDirectory() as folder:
        venv = os.path.join(folder, "venv")
        made = subprocess.run([sys.executable, "-m", "venv", "--without-pip",
                               "--system-site-packages",
                               venv], capture_output=True, text=True,
                              timeout=TIMEOUT, env=child_env(None))
        assert made.returncode == 0, made.stderr
        # (Only sys here: a venv made from another venv does not see that
        # one's packages, NumPy included, which `import gpumem` needs.)
        proc = gpumem("-q", "-c", "import sys; print(sys.prefix)",
                      env=child_env("host", GPUMEM_PYTHON=venv))
        assert proc.returncode == 0, show(proc)
        assert os.path.realpath(proc.stdout.strip()) == \
            os.path.realpath(venv), show(proc)


@gmtest.case
def test_numpy_inside():
    import numpy as np
    assert int(np.arange(10).sum()) == 45
    proc = gpumem("-q", "-c", "import numpy as np; print(np.arange(4) * 2)")
    assert proc.returncode == 0 and proc.stdout == "[0 2 4 6]\n", show(proc)


# --- the man page -----------------------------------------------------------

@gmtest.case
def test_man_page_names_every_option():
    path = os.path.join(gmtest.SRCDIR, "man", "gpumem.1")
    with open(path) as f:
        text = f.read().replace("\\", "")
    listed = help_options(gpumem("--help").stdout)
    assert set(OPTIONS) <= set(listed), listed
    for option in listed:
        assert re.search(re.escape(option) + r"(?![\w-])", text), \
            f"{path} does not name {option}"
    for word in ("GPUMEM_BACKEND", "GPUMEM_PYTHON", "GPUMEM_HOST_DEVICES",
                 "CUDA_VISIBLE_DEVICES", "KeyboardInterrupt", "SystemExit"):
        assert word in text, f"{path} does not name {word}"
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS",
                    "ENVIRONMENT", "EXIT STATUS", "EXAMPLES", "SEE ALSO"):
        assert re.search(r"^\.SH \"?" + section + r"\"?$", text, re.M), \
            f"{path} has no section {section}"


# --- the test harness itself ------------------------------------------------

@gmtest.case
def harness_reports_skips_apart():
    # A case that skips is never "ok", and the summary counts it.
    script = ("import gmtest\n"
              "@gmtest.case\n"
              "def passes(): pass\n"
              "@gmtest.case\n"
              "def skips(): gmtest.skip('not here')\n"
              "@gmtest.case\n"
              "def raises_skip(): raise gmtest.Skip('nor here')\n"
              "gmtest.main()\n")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "cases.py")
        with open(path, "w") as f:
            f.write(script)
        env = child_env("host", GM_TEST_ONLY=None,
                        PYTHONPATH=os.path.dirname(
                            os.path.abspath(gmtest.__file__)))
        proc = gpumem("-q", path, env=env)
        assert proc.returncode == 0, show(proc)
        lines = proc.stdout.splitlines()
        assert "ok   passes" in lines, show(proc)
        assert "SKIP skips: not here" in lines, show(proc)
        assert "SKIP raises_skip: nor here" in lines, show(proc)
        assert lines[-1] == "1 passed, 0 failed, 2 skipped", show(proc)
        with open(path, "w") as f:
            f.write(script.replace("def passes(): pass",
                                   "def passes(): assert False"))
        proc = gpumem("-q", path, env=env)
        assert proc.returncode == 1, show(proc)
        assert proc.stdout.splitlines()[-1] == \
            "0 passed, 1 failed, 2 skipped", show(proc)


# --- folders and zip files, settings ------------------------------------


MAIN_PY = ("import sys\nprint('main', sys.argv[1:], sys.path[0] == sys.argv[0],"
           " __file__.endswith('__main__.py'))\nsys.exit(7)\n")


@gmtest.case
def test_folder_and_zip_run_their_main():
    import zipfile
    with tempfile.TemporaryDirectory(prefix="gm-cli-") as folder:
        app = os.path.join(folder, "app")
        os.mkdir(app)
        with open(os.path.join(app, "__main__.py"), "w") as f:
            f.write(MAIN_PY)
        archive = os.path.join(folder, "app.zip")
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("__main__.py", MAIN_PY)
        for target in (app, archive):
            proc = gpumem("-q", target, "x", "y")
            assert proc.returncode == 7, show(proc)
            assert proc.stdout == "main ['x', 'y'] True True\n", show(proc)
        # A folder without __main__.py fails as python does: status 1.
        empty = os.path.join(folder, "empty")
        os.mkdir(empty)
        proc = gpumem("-q", empty)
        assert proc.returncode == 1, show(proc)
        assert "can't find '__main__' module" in proc.stderr, show(proc)


@gmtest.case
def test_boolean_settings_take_every_spelling():
    probe_mpi = ("import gpumem; "
                 "print(gpumem.show_config(as_dict=True)['gpumem']['mpi'])")
    if gpumem("-q", "-c", probe_mpi).stdout.strip() != "True":
        gmtest.skip("built without MPI: the program does not read "
                    "GPUMEM_MPI")
    # GPUMEM_MPI_CUDA_AWARE is read only when MPI starts: cuda_aware
    # tells whether it did.
    for value, started in (("yes", True), ("TRUE", True), ("on", True),
                           ("1", True), ("no", False), ("false", False),
                           ("Off", False), ("0", False)):
        proc = gpumem("-q", "-c", "import gpumem; print(gpumem.comm.size, "
                      "gpumem.comm.cuda_aware)",
                      env=child_env("host", GPUMEM_MPI=value,
                                    GPUMEM_MPI_CUDA_AWARE="yes"))
        assert proc.returncode == 0 and proc.stdout == f"1 {started}\n", \
            (value, show(proc))
    for name, value in (("GPUMEM_MPI", "maybe"), ("GPUMEM_MPI", "2"),
                        ("GPUMEM_MPI_CUDA_AWARE", "sometimes")):
        extra = {"GPUMEM_MPI": "1", name: value}
        proc = gpumem("-q", "-c", "pass", env=child_env("host", **extra))
        assert proc.returncode == 3, (name, value, show(proc))
        assert f"{name}='{value}'" in proc.stderr, show(proc)
    # GPUMEM_MPI_CHUNK is a size (gm_env_size): suffixes taken, an
    # ambiguous or malformed one, or a value out of range, refused.
    for value, status in (("7", 3), ("64KB", 3), ("1.5K", 3), ("65M", 3),
                          ("64K", 0), ("64KiB", 0), ("64m", 0), ("16", 0)):
        proc = gpumem("-q", "-c", "pass",
                      env=child_env("host", GPUMEM_MPI="1",
                                    GPUMEM_MPI_CHUNK=value))
        assert proc.returncode == status, (value, show(proc))
        if status:
            assert f"GPUMEM_MPI_CHUNK='{value}'" in proc.stderr, show(proc)


@gmtest.case
def test_host_peer_access_setting():
    """GPUMEM_HOST_PEER_ACCESS is read by gm_env_bool, as every boolean
    setting is: each spelling, and a bad one exits 3 naming it."""
    code = "import gpumem; print(gpumem.Device(0).can_access_peer(1))"
    for value, want in (("", "True"), ("1", "True"), ("on", "True"),
                        ("YES", "True"), ("0", "False"), ("no", "False"),
                        ("False", "False"), ("off", "False")):
        proc = gpumem("-q", "-c", code,
                      env=child_env("host", GPUMEM_HOST_PEER_ACCESS=value))
        assert proc.returncode == 0 and proc.stdout == want + "\n", \
            (value, show(proc))
    proc = gpumem("-q", "-c", code,
                  env=child_env("host", GPUMEM_HOST_PEER_ACCESS="nah"))
    assert proc.returncode == 3, show(proc)
    assert "GPUMEM_HOST_PEER_ACCESS='nah'" in proc.stderr, show(proc)


@gmtest.case
def test_small_copies_setting():
    if not cuda_available():
        gmtest.skip("no CUDA device: only the cuda backend reads it")
    code = ("import gpumem, numpy as np; a = gpumem.to_device(np.arange(4.0));"
            " print(a.copy_to_host().sum())")
    for value in ("0", "no", "1", "yes"):
        proc = gpumem("-q", "-c", code,
                      env=child_env("cuda", GPUMEM_SMALL_COPIES=value))
        assert proc.returncode == 0 and proc.stdout == "6.0\n", show(proc)
    for backend in ("cuda", "auto"):
        proc = gpumem("-q", "-c", "pass",
                      env=child_env(backend, GPUMEM_SMALL_COPIES="fast"))
        assert proc.returncode == 3, show(proc)
        assert "GPUMEM_SMALL_COPIES='fast'" in proc.stderr, show(proc)


@gmtest.case
def test_copy_engine_sizes():
    # GPUMEM_COPY_* are sizes (gm_env_size), GPUMEM_COPY_THREADS a
    # count (gm_env_count), read where the CUDA backend starts: a good
    # value works, garbage exits 3 naming it.
    if not cuda_available():
        gmtest.skip("no CUDA device: only the cuda backend reads them")
    code = ("import gpumem, numpy as np; h = np.arange(1 << 20, "
            "dtype=np.float32); a = gpumem.to_device(h); "
            "print(bool((a.copy_to_host() == h).all()))")
    for name, value in (("GPUMEM_COPY_CHUNK", "256K"),
                        ("GPUMEM_COPY_MIN", "0"),
                        ("GPUMEM_COPY_THREADS", "2")):
        proc = gpumem("-q", "-c", code, env=child_env("cuda", **{name: value}))
        assert proc.returncode == 0 and proc.stdout == "True\n", show(proc)
    proc = gpumem("-q", "-c", code, env=child_env(
        "cuda", GPUMEM_COPY_BATCH="1M", GPUMEM_COPY_MIN="0"))
    assert (proc.returncode == 0 and proc.stdout == "True\n") or (
        proc.returncode == 3 and "GPUMEM_COPY_BATCH needs "
        "cudaMemcpyBatchAsync" in proc.stderr), show(proc)
    for name, value in (("GPUMEM_COPY_CHUNK", "16 MB"),
                        ("GPUMEM_COPY_MIN", "-1"),
                        ("GPUMEM_COPY_THREADS", "999"),
                        ("GPUMEM_COPY_THREADS", "1K"),
                        ("GPUMEM_COPY_BATCH", "1 MB")):
        proc = gpumem("-q", "-c", "pass",
                      env=child_env("cuda", **{name: value}))
        assert proc.returncode == 3, show(proc)
        assert name in proc.stderr, show(proc)


@gmtest.case
def test_man_page_documents_every_setting():
    path = os.path.join(gmtest.SRCDIR, "man", "gpumem.1")
    with open(path) as f:
        text = f.read().replace("\\", "")
    read = set()
    for path in gmtest.source_files(".c", folders=("src",)):
        with open(path) as f:
            read |= set(re.findall(r'"(GPUMEM_[A-Z_]+)"', f.read()))
    assert "GPUMEM_SMALL_COPIES" in read and "GPUMEM_MPI_CHUNK" in read
    for variable in sorted(read):
        assert re.search(r"^\.B[RI]? " + variable + r"\b", text, re.M), \
            f"{path} does not document {variable}"
    status = text[text.index(".SH EXIT STATUS"):]
    status = status[:status.index("\n.SH", 1)]
    assert "GPUMEM_MPI_CHUNK" in status and "GPUMEM_MPI" in status, status


gmtest.main()
