"""gpumem._comm_mpi4py: gpumem.comm's transport over mpi4py, where gpumem
was built without MPI of its own (the binary wheel; docs/mpi.md).

Built into gpumem (src/python/py-comm-net.c compiles this file's text when
a job of several processes starts, or at the first comm= argument).  Each
function is one operation of the transport comm-net.h describes, on COMM,
an mpi4py intracommunicator: gpumem's own duplicate of the world for the
job, or the script's for comm=.  The C layer calls them one at a time,
with the other ranks in step; byte buffers come as memoryviews of host
memory.  mpi4py releases the GIL while MPI waits.
"""

import atexit

from mpi4py import MPI

# gpumem's dtypes as MPI's (comm-mpi-types.c has the same table).
_TYPES = {
    "bool": MPI.C_BOOL, "int8": MPI.INT8_T, "int16": MPI.INT16_T,
    "int32": MPI.INT32_T, "int64": MPI.INT64_T, "uint8": MPI.UINT8_T,
    "uint16": MPI.UINT16_T, "uint32": MPI.UINT32_T, "uint64": MPI.UINT64_T,
    "float16": MPI.UINT16_T, "float32": MPI.FLOAT, "float64": MPI.DOUBLE,
    "complex64": MPI.C_FLOAT_COMPLEX, "complex128": MPI.C_DOUBLE_COMPLEX,
}
_OPS = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}


def group(comm, what):
    """This process's rank in COMM and COMM's size, for comm=; TypeError
    or ValueError saying what is wrong with it."""
    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"{what}: comm must be None or an mpi4py "
                        "communicator (mpi4py.MPI.Intracomm), not "
                        f"{type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError(f"{what}: comm is MPI.COMM_NULL, or no "
                         "communicator (this process is not in it)")
    if MPI.Is_finalized():
        raise ValueError(f"{what}: MPI has been finalized: gpumem.comm's "
                         "collectives cannot run after MPI.Finalize()")
    if comm.Is_inter():
        raise ValueError(f"{what}: comm is an intercommunicator; "
                         "collectives take an intracommunicator")
    return comm.Get_rank(), comm.Get_size()


def join(leave):
    """The job's transport: a duplicate of MPI.COMM_WORLD, so that
    gpumem's collectives and messages never match the script's own, and
    what the C layer needs of the job: (comm, rank, size, node_rank,
    node_size, node_of), node_of[r] naming rank r's node (its lowest
    rank).  LEAVE is called while MPI and Python still run: at the
    interpreter's exit, or once the script calls MPI.Finalize()
    (MPI_Finalize deletes MPI.COMM_SELF's attributes first); the second
    call does nothing."""
    comm = MPI.COMM_WORLD.Dup()
    rank, size = comm.Get_rank(), comm.Get_size()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    leader = node.allreduce(rank, op=MPI.MIN)
    node_rank, node_size = node.Get_rank(), node.Get_size()
    node.Free()
    node_of = comm.allgather(leader)

    def release(self_comm, keyval, value):
        leave()
        if comm != MPI.COMM_NULL:
            comm.Free()

    keyval = MPI.Comm.Create_keyval(delete_fn=release)
    MPI.COMM_SELF.Set_attr(keyval, True)
    # mpi4py ends MPI after the interpreter has gone: gpumem leaves
    # before, while Python runs (atexit), if the script did not end MPI.
    atexit.register(leave)
    return comm, rank, size, node_rank, node_size, node_of


def facts():
    """What the report says of the MPI beneath mpi4py: (the standard's
    version, the library's first line, mpi4py's version, the MPI
    library's file, the thread level)."""
    import mpi4py
    level = ""
    if MPI.Is_initialized() and not MPI.Is_finalized():
        level = {MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
                 MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
                 MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED",
                 MPI.THREAD_MULTIPLE: "MPI_THREAD_MULTIPLE"}.get(
                     MPI.Query_thread(), "")
    path = MPI.__file__
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "/libmpi" in line:
                    path = line.split()[-1]
                    break
    except OSError:
        pass
    return ("%d.%d" % MPI.Get_version(),
            MPI.Get_library_version().split("\0")[0].splitlines()[0].strip(),
            mpi4py.__version__, path, level)


def allgather(comm, mine, every):
    comm.Allgather([mine, MPI.BYTE], [every, MPI.BYTE])


def bcast(comm, buf, root):
    comm.Bcast([buf, MPI.BYTE], root)


def allreduce(comm, buf, dtype, op):
    if dtype == "bool":
        mop = MPI.LAND if op == "min" else MPI.LOR
    else:
        mop = _OPS[op]
    comm.Allreduce(MPI.IN_PLACE, [buf, _TYPES[dtype]], mop)


def gather(comm, mine, every, root):
    if every is None:
        comm.Gather([mine, MPI.BYTE], None, root)
    else:
        comm.Gather(MPI.IN_PLACE, [every, MPI.BYTE], root)


def barrier(comm):
    comm.Barrier()


def send(comm, data, dest, tag):
    comm.Send([data, MPI.BYTE], dest, tag)


def try_recv(comm, buf, source, tag):
    """The length of the message from SOURCE with TAG taken into BUF;
    -1 when none has arrived; -2 when it was longer than BUF (dropped)."""
    status = MPI.Status()
    message = comm.Improbe(source, tag, status)
    if message is None:
        return -1
    count = status.Get_count(MPI.BYTE)
    if count > len(buf):
        message.Recv([bytearray(count), MPI.BYTE])
        return -2
    message.Recv([buf, MPI.BYTE])
    return count


def abort():
    MPI.COMM_WORLD.Abort(1)
