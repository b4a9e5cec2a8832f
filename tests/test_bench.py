"""The benchmark's plumbing that runs without a GPU: the commit stamp
(bench/commit.sh, BENCH_COMMIT)."""

import os
import subprocess
import tempfile

import gmtest
from gmtest import case

BENCH = os.path.join(gmtest.SRCDIR, "bench")


def bench_commit(top, **env):
    return subprocess.run(
        ["sh", "-c", '. "$1/commit.sh"; bench_commit "$2"', "sh", BENCH, top],
        env=dict(os.environ, **env), capture_output=True, text=True,
        timeout=60, check=True).stdout.strip()


@case
def commit_stamp():
    with tempfile.TemporaryDirectory() as folder:
        # No .git: says so, and BENCH_COMMIT overrides.
        env = {"BENCH_COMMIT": ""}
        assert bench_commit(folder, **env) == \
            "? (no git checkout: set BENCH_COMMIT)"
        assert bench_commit(folder, BENCH_COMMIT="abc1234 (tarball)") == \
            "abc1234 (tarball)"
        # A folder inside another repository is not that repository's
        # commit.
        subprocess.run(["git", "init", "-q", folder], check=True,
                       timeout=60)
        inner = os.path.join(folder, "copy")
        os.mkdir(inner)
        assert bench_commit(inner, **env).startswith("?")
        subprocess.run(["git", "-C", folder, "-c", "user.name=t", "-c",
                        "user.email=t@t", "commit", "-q", "--allow-empty",
                        "-m", "x"], check=True, timeout=60)
        head = subprocess.run(["git", "-C", folder, "rev-parse", "--short",
                               "HEAD"], capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip()
        assert bench_commit(folder, **env) == head
        assert bench_commit(folder, BENCH_COMMIT="given") == "given"


gmtest.main()
