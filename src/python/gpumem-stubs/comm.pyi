# gpumem.comm: the processes of an MPI job.  The module exists only in
# a build with MPI (make check-stubs says so to stubtest elsewhere).

from collections.abc import Sequence
from typing import Literal, Protocol, SupportsIndex, type_check_only

from gpumem import DeviceArray, Event, Stream

@type_check_only
class _MPIComm(Protocol):
    """An mpi4py communicator (mpi4py.MPI.Intracomm): what comm= takes."""

    def py2f(self) -> int: ...

backend: Literal["nccl", "ipc", "mpi"]  # decided when read (may open NCCL)

def __dir__() -> list[str]: ...
rank: int
size: int
local_rank: int
local_size: int
cuda_aware: bool

def barrier(*, comm: _MPIComm | None = None) -> None: ...
def bcast(
    a: DeviceArray, root: SupportsIndex = 0, *, stream: Stream | None = None, comm: _MPIComm | None = None
) -> None: ...
def allreduce(
    a: DeviceArray,
    op: Literal["sum", "max", "min"] = "sum",
    *,
    stream: Stream | None = None,
    comm: _MPIComm | None = None,
) -> None: ...
def gather(
    a: DeviceArray, root: SupportsIndex = 0, *, stream: Stream | None = None, comm: _MPIComm | None = None
) -> DeviceArray | None: ...
def send_shared(obj: DeviceArray | Event, dest: SupportsIndex, *, tag: SupportsIndex = 0) -> None: ...
def recv_shared(
    source: SupportsIndex, *, tag: SupportsIndex = 0, timeout: float | None = None
) -> DeviceArray | Event: ...
def allreduce_devices(arrays: Sequence[DeviceArray], op: Literal["sum", "max", "min"] = "sum") -> None: ...
def bcast_devices(arrays: Sequence[DeviceArray], root: SupportsIndex = 0) -> None: ...
