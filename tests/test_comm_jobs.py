"""Whole MPI jobs (comm.c, comm-mpi.c, main.c, scripts/stitching_mpi.py):
run as one plain process, which is rank 0 of 1, and starting jobs of
several ranks through tests/gm-mpi-test.sh (mpirun, within a time limit): the
distributed workload gives the single-process result, and a rank that
fails ends the whole job with a clear message instead of leaving the
others waiting.
"""

import os
import subprocess
import tempfile
import time

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

comm = getattr(gpumem, "comm", None)
if comm is None:
    gmtest.skip_file("gpumem was built without MPI")
MPI_TEST = os.environ.get("GM_MPI_TEST")
if not MPI_TEST:
    gmtest.skip_file("GM_MPI_TEST (tests/gm-mpi-test.sh) is not set")
BACKEND = os.environ["GPUMEM_BACKEND"]
SCRIPTS = os.path.join(gmtest.SRCDIR, "scripts")


def job(np_, *args, timeout=60, env=None):
    """Runs gpumem ARGS in an MPI job of NP_ ranks, with ENV added to the
    environment; the CompletedProcess.  The wrapper ends a job that
    outlives TIMEOUT seconds (exit 124)."""
    env = dict(os.environ, GM_MPI_TIMEOUT=str(timeout), **(env or {}))
    return subprocess.run([MPI_TEST, BACKEND, str(np_), *args], env=env,
                          capture_output=True, text=True,
                          timeout=timeout + 60)


def script(text):
    """A temporary script file holding TEXT; its path."""
    handle = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    with handle:
        handle.write(text)
    return handle.name


def update_line(stdout):
    """The workload's "update: [...]" line (without mpirun's tag)."""
    lines = [line.split("update:", 1)[1].strip()
             for line in stdout.splitlines() if "update:" in line]
    assert len(lines) == 1, stdout
    return lines[0]


@case
def alone_the_job_is_rank_0_of_1():
    assert comm.rank == 0 and comm.size == 1
    assert comm.local_rank == 0 and comm.local_size == 1
    assert gpumem.current_device().index == 0
    comm.barrier()
    a = gpumem.to_device(np.arange(6, dtype=np.int16).reshape(2, 3))
    comm.allreduce(a, op="max")
    comm.bcast(a)
    assert np.array_equal(a.copy_to_host(), np.arange(6).reshape(2, 3))
    out = comm.gather(a)
    assert out.shape == (1, 2, 3) and out.dtype == np.int16
    assert np.array_equal(out.copy_to_host()[0], a.copy_to_host())
    raises(ValueError, comm.bcast, a, root=1, match="not a rank")
    raises(TypeError, comm.allreduce,
           gpumem.zeros(2, dtype="complex64"), op="max")
    raises(TypeError, comm.allreduce, gpumem.zeros(2, dtype="float16"))


@case
def distributed_workload_equals_the_single_process_one():
    for kernel in ("algo", "algo_seed"):
        args = ["--kernel", kernel, "--images", "1003", "--iterations", "12",
                "--seed", str(gmtest.SEED)]
        single = subprocess.run(
            [gmtest.GPUMEM, "-q", os.path.join(SCRIPTS, "stitching.py"),
             *args], capture_output=True, text=True, timeout=300)
        assert single.returncode == 0, (single.stdout, single.stderr)
        expect = update_line(single.stdout)
        for ranks in (4, 3, 1):
            proc = job(ranks, os.path.join(SCRIPTS, "stitching_mpi.py"),
                       *args, timeout=120)
            assert proc.returncode == 0, (ranks, proc.stdout, proc.stderr)
            assert "check: matches NumPy" in proc.stdout, proc.stdout
            assert f"{ranks} rank" in proc.stdout, proc.stdout
            assert update_line(proc.stdout) == expect, (ranks, proc.stdout,
                                                        expect)


@case
def the_ranks_default_devices():
    path = script("import gpumem\n"
                  "from gpumem import comm\n"
                  "import sys\n"
                  "# One write of a whole line: mpirun interleaves the\n"
                  "# ranks' output between writes.\n"
                  "sys.stdout.write(f'placement: {comm.rank} {comm.local_rank} '\n"
                  "                 f'{gpumem.current_device().index} '\n"
                  "                 f'{gpumem.device_count()}\\n')\n"
                  "sys.stdout.flush()\n")
    try:
        proc = job(4, path)
    finally:
        os.unlink(path)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    seen = set()
    for line in proc.stdout.splitlines():
        if "placement:" in line:
            rank, local, device, count = map(
                int, line.split("placement:", 1)[1].split())
            assert device == local % count, line
            seen.add(rank)
    assert seen == {0, 1, 2, 3}, proc.stdout


@case
def an_exception_on_one_rank_aborts_the_job():
    path = script("import gpumem\n"
                  "from gpumem import comm\n"
                  "a = gpumem.zeros(4)\n"
                  "comm.barrier()\n"
                  "if comm.rank == 2:\n"
                  "    raise RuntimeError('boom on rank 2')\n"
                  "comm.allreduce(a)   # the others would wait here\n"
                  "print('not reached')\n")
    try:
        proc = job(4, path, timeout=60)
    finally:
        os.unlink(path)
    assert proc.returncode not in (0, 124, 137), (proc.returncode,
                                                  proc.stderr)
    assert "RuntimeError: boom on rank 2" in proc.stderr, proc.stderr
    assert "gpumem: rank 2 failed (exit 1); aborting the job" in proc.stderr
    assert "not reached" not in proc.stdout


@case
def a_nonzero_exit_on_one_rank_aborts_the_job():
    path = script("import sys, gpumem\n"
                  "from gpumem import comm\n"
                  "if comm.rank == 1:\n"
                  "    sys.exit(3)\n"
                  "comm.barrier()\n")
    try:
        proc = job(3, path, timeout=60)
    finally:
        os.unlink(path)
    assert proc.returncode not in (0, 124, 137), (proc.returncode,
                                                  proc.stderr)
    assert "gpumem: rank 1 failed (exit 3); aborting the job" in proc.stderr


@case
def mismatched_arrays_in_a_job_raise_not_hang():
    path = script("import gpumem\n"
                  "from gpumem import comm\n"
                  "a = gpumem.zeros(4 + comm.rank)\n"
                  "try:\n"
                  "    comm.allreduce(a)\n"
                  "except ValueError as exc:\n"
                  "    print('raised', comm.rank, exc)\n")
    try:
        proc = job(4, path, timeout=60)
    finally:
        os.unlink(path)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.count("raised") == 4, proc.stdout


@case
def a_stalled_rank_ends_the_job_after_the_timeout():
    # Rank 1 never joins the allreduce; after GPUMEM_COMM_TIMEOUT the
    # others' watchdog ends the job with a message, instead of the job
    # waiting for ever.
    path = script("import time, gpumem\n"
                  "from gpumem import comm\n"
                  "a = gpumem.zeros(4)\n"
                  "comm.allreduce(a)\n"
                  "if comm.rank == 1:\n"
                  "    time.sleep(120)\n"
                  "comm.allreduce(a)\n"
                  "print('not reached')\n")
    start = time.monotonic()
    try:
        # 5 s: on NCCL (3 GPUs) the first collective makes the
        # communicator, which counts too.
        proc = job(3, path, timeout=90, env={"GPUMEM_COMM_TIMEOUT": "5"})
    finally:
        os.unlink(path)
    elapsed = time.monotonic() - start
    assert proc.returncode not in (0, 124, 137), (proc.returncode,
                                                  proc.stderr)
    assert "gpumem.comm.allreduce waited more than 5 s for the other ranks " \
        "(GPUMEM_COMM_TIMEOUT)" in proc.stderr, proc.stderr
    assert "aborting the job" in proc.stderr, proc.stderr
    assert "not reached" not in proc.stdout
    assert elapsed < 60, elapsed


@case
def a_rank_killed_mid_job_ends_the_job():
    # SIGKILL leaves no chance to call MPI_Abort: the launcher sees the
    # rank die and ends the others (or, failing that, their timeout).
    path = script("import os, signal, gpumem\n"
                  "from gpumem import comm\n"
                  "a = gpumem.zeros(1 << 16)\n"
                  "comm.allreduce(a)\n"
                  "if comm.rank == 1:\n"
                  "    os.kill(os.getpid(), signal.SIGKILL)\n"
                  "comm.allreduce(a)\n"
                  "print('not reached')\n")
    start = time.monotonic()
    try:
        proc = job(3, path, timeout=90, env={"GPUMEM_COMM_TIMEOUT": "20"})
    finally:
        os.unlink(path)
    elapsed = time.monotonic() - start
    assert proc.returncode not in (0, 124), (proc.returncode, proc.stderr)
    assert "not reached" not in proc.stdout
    assert elapsed < 60, elapsed


@case
def gpumem_comm_nccl_raises_on_every_rank_where_nccl_cannot_run():
    if comm.backend == "nccl":
        gmtest.skip("NCCL is this build's engine here (the NCCL jobs "
                    "below test it)")
    path = script("import gpumem\n"
                  "from gpumem import comm\n"
                  "try:\n"
                  "    comm.allreduce(gpumem.zeros(4))\n"
                  "except gpumem.Error as exc:\n"
                  "    print('raised', comm.rank, exc, flush=True)\n"
                  "comm.barrier()\n")
    try:
        proc = job(2, path, env={"GPUMEM_COMM": "nccl"})
    finally:
        os.unlink(path)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.count("raised") == 2, proc.stdout
    assert "GPUMEM_COMM=nccl, but NCCL cannot run it: rank 0:" \
        in proc.stdout, proc.stdout


@case
def gpumem_comm_ipc_raises_on_every_rank_where_ranks_use_other_devices():
    # Two ranks on two devices (the host backend's simulated ones, or two
    # GPUs) cannot share windows of one device; with one device they can.
    if gpumem.device_count() < 2:
        gmtest.skip("needs 2 devices for ranks on different devices")
    path = script("import gpumem\n"
                  "from gpumem import comm\n"
                  "a = gpumem.zeros(4, device=comm.rank)\n"
                  "try:\n"
                  "    comm.allreduce(a)\n"
                  "except gpumem.Error as exc:\n"
                  "    print('raised', comm.rank, exc, flush=True)\n"
                  "b = gpumem.full(4, comm.rank + 1.0, device=0)\n"
                  "comm.allreduce(b)\n"
                  "same = b.copy_to_host().tolist() == [3.0] * 4\n"
                  "good = gpumem.full(1, int(same and comm.backend == 'ipc'),"
                  " dtype='int32', device=0)\n"
                  "comm.allreduce(good, op='min')\n"
                  "if comm.rank == 0:\n"
                  "    print('summed on every rank:', good.copy_to_host()[0],"
                  " flush=True)\n")
    try:
        proc = job(2, path, env={"GPUMEM_COMM": "ipc"})
    finally:
        os.unlink(path)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.count("raised") == 2, proc.stdout
    assert "GPUMEM_COMM=ipc, but rank 1 uses another device or node than " \
        "rank 0; no data was moved" in proc.stdout, proc.stdout
    assert "summed on every rank: 1" in proc.stdout, proc.stdout


@case
def ranks_that_set_gpumem_comm_differently_raise_everywhere():
    # The ranks must choose alike; rank 1 runs with GPUMEM_COMM=mpi, the
    # others with auto (a wrapper sets it a rank, as a site script
    # might), and every rank raises before any data moves.
    fd, wrapper = tempfile.mkstemp(suffix=".sh")
    with os.fdopen(fd, "w") as handle:
        handle.write("#!/bin/sh\n"
                     "if test \"$OMPI_COMM_WORLD_RANK\" = 1; then\n"
                     "  GPUMEM_COMM=mpi\n"
                     "else\n"
                     "  GPUMEM_COMM=auto\n"
                     "fi\n"
                     "export GPUMEM_COMM\n"
                     f"exec '{gmtest.GPUMEM}' \"$@\"\n")
    os.chmod(wrapper, 0o755)
    path = script("import numpy as np, gpumem\n"
                  "from gpumem import comm\n"
                  "a = gpumem.to_device(np.full(4, comm.rank, np.int32))\n"
                  "try:\n"
                  "    comm.allreduce(a)\n"
                  "except ValueError as exc:\n"
                  "    print('raised', comm.rank, exc, flush=True)\n"
                  "assert (a.copy_to_host() == comm.rank).all()\n")
    try:
        proc = job(3, path, env={"GM_MPI_PROGRAM": wrapper})
    finally:
        os.unlink(path)
        os.unlink(wrapper)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.count("raised") == 3, proc.stdout
    assert "the ranks set GPUMEM_COMM differently: rank 0 'auto', rank 1 " \
        "'mpi'" in proc.stdout, proc.stdout


def need_nccl_jobs():
    """Skips the case unless 2-rank jobs run on NCCL here."""
    if comm.backend != "nccl" or gpumem.device_count() < 2:
        gmtest.skip(f"needs NCCL and 2 GPUs (engine {comm.backend}, "
                    f"{gpumem.device_count()} device(s))")


@case
def on_nccl_a_rank_raising_mid_collective_aborts_the_job():
    need_nccl_jobs()
    path = script("import gpumem\n"
                  "from gpumem import comm\n"
                  "assert comm.backend == 'nccl'\n"
                  "a = gpumem.zeros(1 << 20)\n"
                  "comm.allreduce(a)   # the communicator exists now\n"
                  "if comm.rank == 1:\n"
                  "    raise RuntimeError('boom on rank 1')\n"
                  "comm.allreduce(a)\n"
                  "print('not reached')\n")
    try:
        proc = job(2, path, timeout=90,
                   env={"GPUMEM_COMM": "nccl", "GPUMEM_COMM_TIMEOUT": "20"})
    finally:
        os.unlink(path)
    assert proc.returncode not in (0, 124, 137), (proc.returncode,
                                                  proc.stderr)
    assert "RuntimeError: boom on rank 1" in proc.stderr, proc.stderr
    assert "gpumem: rank 1 failed (exit 1); aborting the job" in proc.stderr
    assert "not reached" not in proc.stdout


@case
def on_nccl_a_peer_stuck_after_agreeing_times_out():
    # Rank 1 queues its part on a stream behind a 60 s kernel: the
    # ranks agreed, and rank 0's NCCL allreduce waits for a peer that
    # does not come; GPUMEM_COMM_TIMEOUT ends it (NCCL's communicator
    # aborted, then the job).
    need_nccl_jobs()
    path = script("import gpumem\n"
                  "from gpumem import comm\n"
                  "a = gpumem.zeros(1 << 20)\n"
                  "comm.allreduce(a)\n"
                  "if comm.rank == 1:\n"
                  "    s = gpumem.Stream()\n"
                  "    flag = gpumem.zeros(1, dtype='int32')\n"
                  "    gpumem.kernels.spin(60000, flag, stream=s)\n"
                  "    comm.allreduce(a, stream=s)\n"
                  "    s.synchronize()\n"
                  "else:\n"
                  "    comm.allreduce(a)\n"
                  "print('not reached', comm.rank)\n")
    start = time.monotonic()
    try:
        # 8 s: the first collective makes the communicator, which
        # counts too and may take a few seconds.
        proc = job(2, path, timeout=120,
                   env={"GPUMEM_COMM": "nccl", "GPUMEM_COMM_TIMEOUT": "8",
                        "GM_MPI_PROGRAM": gmtest.GPUMEM_TEST})
    finally:
        os.unlink(path)
    elapsed = time.monotonic() - start
    assert proc.returncode not in (0, 124, 137), (proc.returncode,
                                                  proc.stderr)
    assert "(GPUMEM_COMM_TIMEOUT)" in proc.stderr, proc.stderr
    assert "gpumem: rank 0: " in proc.stderr, proc.stderr
    assert "aborting the job" in proc.stderr, proc.stderr
    assert "not reached" not in proc.stdout
    assert elapsed < 50, elapsed


gmtest.main()
