"""The stitching workload end to end (scripts/stitching.py)."""

import os
import re
import subprocess

import gmtest
from gmtest import case

SCRIPT = os.path.join(gmtest.SRCDIR, "scripts", "stitching.py")


def run(*args):
    proc = subprocess.run([gmtest.GPUMEM, "-q", SCRIPT, *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "check: matches NumPy" in proc.stdout, proc.stdout
    return proc.stdout


@case
def four_by_ten():
    for kernel in ("algo", "algo_seed"):
        out = run("--kernel", kernel, "--images", "40", "--iterations", "20",
                  "--seed", str(gmtest.SEED))
        assert "partitions on devices" in out


@case
def four_by_a_million_and_three():
    for kernel in ("algo", "algo_seed"):
        run("--kernel", kernel, "--images", str(4 * 1000003),
            "--iterations", "5", "--seed", str(gmtest.SEED))


@case
def concurrent_equals_serial():
    """The partitions' devices at the same time (the default) give the
    very bits of the run one call after another (--serial)."""
    for images in ("40", str(4 * 100003 + 3)):
        got = {}
        for mode in ((), ("--serial",)):
            out = run("--images", images, "--iterations", "12", "--seed",
                      str(gmtest.SEED), *mode)
            assert ("serial" if mode else "concurrent") in out, out
            got[mode] = [line for line in out.splitlines()
                         if line.startswith("update:")]
        assert got[()] == got[("--serial",)] and got[()], got


@case
def graph_equals_plain_loop():
    """Replaying one captured iteration (--graph) gives the very bits of
    the plain loop, at several image counts, with both kernels."""
    for kernel in ("algo", "algo_seed"):
        for images in ("4", "40", "1001", str(4 * 100003 + 3)):
            got = {}
            for mode in ((), ("--serial",), ("--graph",)):
                out = run("--kernel", kernel, "--images", images,
                          "--iterations", "12", "--seed", str(gmtest.SEED),
                          *mode)
                got[mode] = [line for line in out.splitlines()
                             if line.startswith("update:")]
            assert "graph" in out, out
            assert got[()] and got[()] == got[("--serial",)] \
                == got[("--graph",)], (kernel, images, got)


@case
def managed_images_equal_device_images():
    """Images in managed memory (--memory managed), prefetched or not,
    give the very bits of the run with device images."""
    for images in ("40", str(4 * 100003 + 3)):
        got = {}
        for mode in ((), ("--memory", "managed"),
                     ("--memory", "managed", "--prefetch"),
                     ("--memory", "managed", "--prefetch", "--serial"),
                     ("--memory", "managed", "--graph")):
            out = run("--images", images, "--iterations", "12", "--seed",
                      str(gmtest.SEED), *mode)
            assert ("managed images" in out) == bool(mode), out
            got[mode] = [line for line in out.splitlines()
                         if line.startswith("update:")]
        assert got[()] and all(g == got[()] for g in got.values()), got
    for bad in (("--prefetch",), ("--memory", "managed", "--prefetch",
                                  "--graph"), ("--memory", "pinned")):
        proc = subprocess.run([gmtest.GPUMEM, "-q", SCRIPT, *bad],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (bad, proc.stderr)


@case
def spilled_images_equal_device_images():
    """Images that do not fit the limit together (--spill), coming back
    on use or prefetched, give the very bits of the run that fits; the
    host backend's four simulated devices are one here, so that every
    partition shares its limit."""
    env = dict(os.environ, GPUMEM_HOST_DEVICES="1")
    got = {}
    for mode in ((), ("--spill", "2560KiB"), ("--spill", "2560KiB",
                                              "--prefetch"),
                 ("--spill", "2560KiB", "--serial")):
        proc = subprocess.run([gmtest.GPUMEM, "-q", SCRIPT, "--images",
                               str(4 * 262144), "--iterations", "6",
                               "--seed", str(gmtest.SEED), *mode],
                              capture_output=True, text=True, timeout=600,
                              env=env)
        assert proc.returncode == 0, (mode, proc.stdout, proc.stderr)
        assert "check: matches NumPy" in proc.stdout, proc.stdout
        assert ("spilling past" in proc.stdout) == bool(mode), proc.stdout
        got[mode] = [line for line in proc.stdout.splitlines()
                     if line.startswith("update:")]
    assert got[()] and all(g == got[()] for g in got.values()), got
    proc = subprocess.run([gmtest.GPUMEM, "-q", SCRIPT, "--spill", "1MiB",
                           "--memory", "managed"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr


@case
def graph_and_serial_exclude_each_other():
    proc = subprocess.run([gmtest.GPUMEM, "-q", SCRIPT, "--graph",
                           "--serial"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "--graph" in proc.stderr, proc.stderr


@case
def the_report_names_its_seed_and_its_time():
    """An unseeded run prints the seed it drew, which repeats it; the
    elapsed time is the run's, not a sum rounded to zero."""
    out = run("--iterations", "3")
    m = re.search(r"; seed (\d+)$", out, re.M)
    assert m, out
    again = run("--iterations", "3", "--seed", m.group(1))
    assert [l for l in out.splitlines() if l.startswith("update:")] == \
        [l for l in again.splitlines() if l.startswith("update:")], again
    m = re.search(r"the run (\d+\.\d+) s elapsed", out)
    assert m and float(m.group(1)) > 0, out


@case
def an_update_that_overflows_fails():
    """200 iterations overflow float32: exit status 1 and a message that
    says why, not a silent [nan ...]; with --no-check (timing runs, as
    make bench's) the message and exit status 0."""
    for extra, status in (((), 1), (("--no-check",), 0)):
        proc = subprocess.run([gmtest.GPUMEM, "-q", SCRIPT, "--iterations",
                               "200", "--seed", str(gmtest.SEED), *extra],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == status, (extra, proc.returncode,
                                           proc.stdout)
        assert "no longer finite" in proc.stderr, proc.stderr
        assert "--iterations" in proc.stderr, proc.stderr


@case
def bad_arguments_exit_2():
    proc = subprocess.run([gmtest.GPUMEM, "-q", SCRIPT, "--images", "2"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--images" in proc.stderr


gmtest.main()
