"""gpumem.comm in the extension module: 'import gpumem' in a plain python
started by mpirun (py-standalone.c, comm-mpi.c; in a build without MPI,
py-comm-net.c over mpi4py).  Run as one plain
process by the program, which starts jobs of 2 ranks of sys.executable
(GM_MPIRUN, with --oversubscribe and, as root, --allow-run-as-root):
the module starts the job's MPI, or joins it where mpi4py started it
first, and every rank sees the job's rank and size and the collectives'
true results; mpi4py imported before or after gpumem runs beside it at
MPI_THREAD_MULTIPLE; a collective after MPI.Finalize() raises instead
of returning this rank's own data.  In a build without MPI (the binary
wheel's) the same jobs run over mpi4py, which gpumem imports itself when
the script did not; without mpi4py there gpumem.comm is absent and says
how to get it, instead of a job whose ranks each run alone.
"""

import os
import subprocess
import sys
import tempfile

import gmtest
from gmtest import case

import gpumem

BUILT_WITH_MPI = gpumem.show_config(as_dict=True)["gpumem"]["mpi"]
MPIRUN = os.environ.get("GM_MPIRUN")
if not MPIRUN:
    gmtest.skip_file("GM_MPIRUN (configure's mpirun) is not set")
if gmtest.sanitized():
    gmtest.skip_file("sanitized build: its extension module cannot load "
                     "in a plain python")

try:
    import mpi4py  # noqa: F401
    HAVE_MPI4PY = True
except ImportError:
    HAVE_MPI4PY = False
if not BUILT_WITH_MPI and not HAVE_MPI4PY:
    gmtest.skip_file("gpumem was built without MPI, and runs jobs over "
                     "mpi4py, which is not installed (pip install mpi4py)")

# Each rank writes one line "key=value ..." to the file rank-RANK of the
# folder argv[2] (mpirun's output would interleave the ranks' lines).
RANK_SCRIPT = r"""
import os
import sys
import warnings
mode = sys.argv[1]
if mode == "no-mpi4py":
    # As if mpi4py were not installed.
    sys.modules["mpi4py"] = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import gpumem
    facts = ["rank=%s" % os.environ["OMPI_COMM_WORLD_RANK"],
             "warned=%s" % any("gpumem[mpi]" in str(w.message)
                               for w in caught)]
    try:
        gpumem.comm
        facts.append("comm=present")
    except AttributeError as error:
        facts.append("comm=AttributeError:%s" % error)
    with open("%s/rank-%s" % (sys.argv[2], os.environ["OMPI_COMM_WORLD_RANK"]),
              "w") as out:
        out.write(" ".join(f.replace(" ", "") for f in facts))
    sys.exit(0)
if mode in ("mpi4py-first", "finalize", "subcomm"):
    from mpi4py import MPI
import numpy as np
import gpumem
if mode == "mpi4py-last":
    from mpi4py import MPI
comm = gpumem.comm
rank, size = comm.rank, comm.size
a = gpumem.to_device(np.arange(5, dtype=np.float64) + 10 * (rank + 1))
comm.allreduce(a)
total = a.copy_to_host().tolist()
b = gpumem.to_device(np.full(3, rank + 7, dtype=np.int32))
comm.bcast(b, root=1)
g = comm.gather(gpumem.to_device(np.array([rank, -rank], dtype=np.int16)))
facts = ["rank=%d" % rank, "size=%d" % size,
         "allreduce=%s" % total, "bcast=%s" % b.copy_to_host().tolist(),
         "gather=%s" % (g.copy_to_host().tolist() if rank == 0 else g)]
mpi = gpumem.show_config(as_dict=True)["mpi"]
facts += ["config_running=%s" % mpi["running"], "config_size=%d" % mpi["size"],
          "config_thread=%s" % mpi["thread_level"],
          "config_joined=%s" % ("joined" in mpi["started_by"])]
if "MPI" in globals():
    world = MPI.COMM_WORLD
    # The script's own collective on the world, between two of gpumem's.
    facts += ["mpi4py_rank=%d" % world.Get_rank(),
              "mpi4py_sum=%d" % world.allreduce(rank + 1),
              "thread=%d" % MPI.Query_thread(),
              "multiple=%d" % MPI.THREAD_MULTIPLE]
    # A DeviceArray as mpi4py's buffer (DLPack): host memory on the host
    # backend; device memory only where MPI is CUDA-aware.
    if gpumem.backend == "host" or comm.cuda_aware:
        x = gpumem.to_device(np.arange(3, dtype=np.int64) * (rank + 1))
        y = gpumem.zeros(3, dtype=np.int64)
        world.Allreduce(x, y)
        facts.append("mpi4py_buffer=%s" % y.copy_to_host().tolist())
    else:
        facts.append("mpi4py_buffer=not-cuda-aware")
    comm.barrier()
    if mode == "subcomm":
        # The world's ranks reversed (rank 0 of REV is world rank 1), and
        # a communicator of each rank alone.
        rev = world.Split(0, key=size - rank)
        alone = world.Split(rank, key=0)
        x = gpumem.to_device(np.arange(3, dtype=np.float32) + 10 * rank)
        comm.bcast(x, root=0, comm=rev)
        facts.append("sub_bcast=%s" % x.copy_to_host().tolist())
        y = gpumem.to_device(np.full(2, rank + 1, dtype=np.int32))
        comm.allreduce(y, comm=rev)
        facts.append("sub_allreduce=%s" % y.copy_to_host().tolist())
        g = comm.gather(gpumem.to_device(np.array([rank], dtype=np.int16)),
                        comm=rev)
        facts.append("sub_gather=%s"
                     % (g.copy_to_host().tolist() if g is not None else g))
        z = gpumem.to_device(np.full(2, rank + 1, dtype=np.int32))
        comm.allreduce(z, comm=alone)
        facts.append("alone_allreduce=%s" % z.copy_to_host().tolist())
        comm.barrier(comm=rev)
        try:
            comm.bcast(x, root=1, comm=alone)
            facts.append("bad_root=returned")
        except ValueError as error:
            facts.append("bad_root=ValueError:%s" % error)
        try:
            comm.allreduce(x, comm="world")
            facts.append("bad_comm=returned")
        except TypeError as error:
            facts.append("bad_comm=TypeError:%s" % error)
        # The job's own collectives go on as before.
        w = gpumem.to_device(np.full(2, rank + 1, dtype=np.int32))
        comm.allreduce(w)
        facts.append("world_after=%s" % w.copy_to_host().tolist())
        rev.Free()
        alone.Free()
    if mode == "finalize":
        MPI.Finalize()
        try:
            comm.allreduce(a)
            facts.append("after_finalize=returned")
        except gpumem.Error as error:
            facts.append("after_finalize=raised:%s" % error)
with open("%s/rank-%d" % (sys.argv[2], rank), "w") as out:
    out.write(" ".join(f.replace(" ", "") for f in facts))
"""


def job(mode, env=None):
    """Runs RANK_SCRIPT in MODE under mpirun -n 2 with sys.executable;
    each rank's facts as a dict, by rank."""
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "rank.py")
        with open(script, "w") as handle:
            handle.write(RANK_SCRIPT)
        argv = [MPIRUN, "-n", "2", "--oversubscribe"]
        if os.getuid() == 0:
            argv.append("--allow-run-as-root")
        environ = dict(os.environ, **(env or {}))
        for name in ("GPUMEM_BACKEND", "PYTHONPATH", "GPUMEM_MPI"):
            if name in environ:
                argv += ["-x", name]
        argv += [sys.executable, script, mode, folder]
        got = subprocess.run(argv, env=environ, capture_output=True,
                             text=True, timeout=120)
        assert got.returncode == 0, (got.returncode, got.stdout, got.stderr)
        ranks = {}
        for rank in (0, 1):
            path = os.path.join(folder, "rank-%d" % rank)
            assert os.path.exists(path), (rank, got.stdout, got.stderr)
            with open(path) as handle:
                ranks[rank] = dict(f.split("=", 1)
                                   for f in handle.read().split())
    for rank, facts in ranks.items():
        assert facts["rank"] == str(rank), facts
    return ranks


def check_joined(ranks, joined):
    """show_config() says whether gpumem JOINED an MPI others started."""
    for facts in ranks.values():
        assert facts["config_joined"] == str(joined), facts


def check_results(ranks):
    """Every rank saw the job of 2 and the collectives' true results."""
    for rank, facts in ranks.items():
        assert facts["size"] == "2", facts
        # 10+20 = 30 added to 2 * arange(5).
        assert facts["allreduce"] == "[30.0,32.0,34.0,36.0,38.0]", facts
        assert facts["bcast"] == "[8,8,8]", facts
        # gpumem.show_config() says so too.
        assert facts["config_running"] == "True", facts
        assert facts["config_size"] == "2", facts
        assert facts["config_thread"] == "MPI_THREAD_MULTIPLE", facts
    assert ranks[0]["gather"] == "[[0,0],[1,-1]]", ranks[0]
    assert ranks[1]["gather"] == "None", ranks[1]


def need_mpi4py():
    if not HAVE_MPI4PY:
        gmtest.skip("mpi4py is not installed (pip install mpi4py)")


@case
def the_module_starts_the_jobs_mpi():
    ranks = job("alone")
    check_results(ranks)
    check_joined(ranks, False)


@case
def gpumem_mpi_1_starts_it_too():
    check_results(job("alone", {"GPUMEM_MPI": "1"}))


@case
def mpi4py_imported_first_is_joined():
    need_mpi4py()
    ranks = job("mpi4py-first")
    check_results(ranks)
    check_joined(ranks, True)
    for rank, facts in ranks.items():
        assert facts["mpi4py_rank"] == str(rank), facts
        assert facts["mpi4py_sum"] == "3", facts
        assert facts["thread"] == facts["multiple"], facts
        check_buffer(facts)


def check_buffer(facts):
    """mpi4py's Allreduce of DeviceArrays gave the sum, where it ran."""
    if facts["mpi4py_buffer"] == "not-cuda-aware":
        return
    assert facts["mpi4py_buffer"] == "[0,3,6]", facts


@case
def mpi4py_imported_last_gets_thread_multiple():
    need_mpi4py()
    ranks = job("mpi4py-last")
    check_results(ranks)
    check_joined(ranks, False)
    for rank, facts in ranks.items():
        assert facts["mpi4py_rank"] == str(rank), facts
        assert facts["mpi4py_sum"] == "3", facts
        assert facts["thread"] == facts["multiple"], facts
        check_buffer(facts)


@case
def collectives_on_an_mpi4py_sub_communicator():
    need_mpi4py()
    ranks = job("subcomm")
    check_results(ranks)
    for rank, facts in ranks.items():
        # REV's root is world rank 1, whose x is 10 + arange(3).
        assert facts["sub_bcast"] == "[10.0,11.0,12.0]", facts
        assert facts["sub_allreduce"] == "[3,3]", facts
        assert facts["alone_allreduce"] == "[%d,%d]" % (rank + 1, rank + 1)
        assert facts["bad_root"].startswith("ValueError:"), facts
        assert "notarankofcomm" in facts["bad_root"], facts
        assert facts["bad_comm"].startswith("TypeError:"), facts
        assert "mpi4py" in facts["bad_comm"], facts
        assert facts["world_after"] == "[3,3]", facts
    # Row r of REV's gather is REV's rank r: world ranks 1, then 0.
    assert ranks[1]["sub_gather"] == "[[1],[0]]", ranks[1]
    assert ranks[0]["sub_gather"] == "None", ranks[0]


@case
def a_collective_after_finalize_raises():
    need_mpi4py()
    ranks = job("finalize")
    for facts in ranks.values():
        assert facts["after_finalize"].startswith("raised:"), facts
        assert "finalized" in facts["after_finalize"], facts


@case
def without_mpi4py_the_wheels_comm_is_absent_and_says_why():
    if BUILT_WITH_MPI:
        gmtest.skip("gpumem was built with MPI of its own: it needs no "
                    "mpi4py")
    version = subprocess.run([MPIRUN, "--version"], capture_output=True,
                             text=True).stdout
    if "Open MPI" not in version and "OpenRTE" not in version:
        gmtest.skip("the case reads Open MPI's OMPI_COMM_WORLD_RANK")
    for rank, facts in job("no-mpi4py").items():
        assert facts["warned"] == "True", facts
        assert facts["comm"].startswith("AttributeError:"), facts
        assert "pipinstall'gpumem[mpi]'" in facts["comm"], facts


if __name__ == "__main__":
    gmtest.main()

