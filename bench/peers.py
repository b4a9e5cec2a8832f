"""gpumem against the other memory libraries of a Python HPC user, CuPy,
PyTorch, RMM and cuda.core (issue 55): the same operations through each
library's own API, one process a library, several processes a side in
turn, medians; each row's verdict is gpumem over the fastest peer of the
same run.  The peers section of make bench.

    python3 bench/peers.py --out RECORDS.jsonl --table peers.md
        [--gpumem PROGRAM] [--gpumem-module DIR] [--rounds N] [--quick]
        [--backend cuda|host]
        [--wheels DIR] [--site DIR] [--libs gpumem,cupy,...]

The rows (ROWS): allocate + free 1 MiB of device memory; pageable and
page-locked copies of 256 MiB each way; torch.from_dlpack of each
library's buffer and each library taking a tensor back; a spawned child
opening the parent's 1 GiB (the open, with the child's CUDA context made
first, and the child's read bandwidth); page-locked host memory of 1 MiB
allocated and freed; managed memory of 1 MiB allocated and freed.  A
library that cannot be imported gives its cells, and any row left
without gpumem or without a peer, "not run: LIBRARY not importable
(REASON)"; an operation a library's API does not have says so
("RMM's DeviceBuffer has no __dlpack__").

gpumem's processes run under this Python, as every peer's do, with its
extension module from --gpumem-module DIR (src/.libs of the build; the
interpreter is then the same on every side); where DIR holds no module
for this Python, or none is given, under PROGRAM (src/gpumem), which
embeds its own.  The table's first line says which.

RMM and cuda.core come as wheels (rmm-cu13, librmm-cu13, rapids-logger,
cuda-core, cuda-bindings, cuda-pathfinder): --wheels DIR unpacks
DIR/*.whl into --site (default a folder beside the table) and
puts it first on PYTHONPATH of RMM's and cuda.core's processes (not
CuPy's and PyTorch's: its cuda-bindings would shadow theirs); --site
alone uses a folder already installed (pip install --no-index --no-deps
--target SITE DIR/*.whl).

The table (--table) holds every library's figure per row and one verdict
line a row, "- ROW: ... **met**", "**not met**" or "**not run: WHY**",
which bench/report.py counts among the run's verdicts.  Exit status 0
when the table was written (whatever the verdicts), 1 when a library's
process failed or an operation raised.  --backend host runs gpumem on
its host backend: a dry run of the plumbing, not a measurement.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from processes import paired_ratio  # noqa: E402

MIB, GIB = 1 << 20, 1 << 30
LIBS = ("gpumem", "cupy", "torch", "rmm", "cuda.core")
PEERS = LIBS[1:]
LABEL = {"gpumem": "gpumem", "cupy": "CuPy", "torch": "PyTorch",
         "rmm": "RMM", "cuda.core": "cuda.core"}
# The module each library is imported as.
MODULE = {"gpumem": "gpumem", "cupy": "cupy", "torch": "torch",
          "rmm": "rmm", "cuda.core": "cuda.core"}
# The libraries that --site (--wheels) is for.
SITE_LIBS = ("rmm", "cuda.core")
# The operations each library's process runs (ipc runs apart: a parent
# and a spawned child of its own).
OPS = ("alloc", "copy", "dlpack", "pinned", "managed")


class Row:
    """One row: OP's CASE, a time ("time": seconds per operation, lower
    is better) or a bandwidth ("bw": GB/s, higher is better)."""

    def __init__(self, name, label, op, case, kind):
        self.name, self.label, self.op, self.case, self.kind = \
            name, label, op, case, kind


ROWS = [
    Row("alloc", "allocate + free 1 MiB of device memory", "alloc",
        "1MiB", "time"),
    Row("pageable_h2d", "pageable host->device, 256 MiB", "copy",
        "pageable_h2d", "bw"),
    Row("pageable_d2h", "pageable device->host, 256 MiB", "copy",
        "pageable_d2h", "bw"),
    Row("pinned_h2d", "page-locked host->device, 256 MiB", "copy",
        "pinned_h2d", "bw"),
    Row("pinned_d2h", "page-locked device->host, 256 MiB", "copy",
        "pinned_d2h", "bw"),
    Row("to_torch", "torch.from_dlpack of the library's 1 MiB buffer",
        "dlpack", "to_torch", "time"),
    Row("from_torch", "the library taking a 1 MiB tensor back "
        "(its from_dlpack)", "dlpack", "from_torch", "time"),
    Row("ipc_open", "a child opening the parent's 1 GiB (its CUDA "
        "context made first)", "ipc", "open", "time"),
    Row("ipc_read", "the child's read of the parent's 1 GiB (copy into "
        "its own, read + write)", "ipc", "read", "bw"),
    Row("pinned_alloc", "allocate + free 1 MiB of page-locked host memory",
        "pinned", "1MiB", "time"),
    Row("managed_alloc", "allocate + free 1 MiB of managed memory",
        "managed", "1MiB", "time"),
]


def figures():
    """The figures the records hold, as bench/run.sh's section lists
    them."""
    return ["peer_" + op for op in OPS + ("ipc",)]


# ---------------------------------------------------------------------------
# Timing, in the libraries' processes.

def per_call(fn, calls=None, repeats=9, quick=False):
    """Seconds per call of FN: the median of REPEATS loops of CALLS
    calls after a warm-up; CALLS chosen for about 20 ms a loop where
    None."""
    if quick:
        repeats = 3
    start = time.perf_counter()
    done = 0
    while done < 1000 and time.perf_counter() - start < 0.2:
        fn()
        done += 1
    if calls is None:
        each = (time.perf_counter() - start) / done
        calls = max(10, min(20000, int(0.02 / max(each, 1e-9))))
    if quick:
        calls = min(calls, 50)
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t) / calls)
    return statistics.median(samples)


def copy_rate(fn, nbytes, reps=10, quick=False):
    """GB/s of FN (one synchronous copy of NBYTES): the median of REPS
    after 3."""
    if quick:
        reps = 3
    for _ in range(3):
        fn()
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return nbytes / statistics.median(samples) / 1e9


class Absent(Exception):
    """The library's API has no such operation (the message says why)."""


def each_variant(makers):
    """{variant: {case: value}} of MAKERS ({variant: function of no
    arguments giving {case: value}}), a variant that raises recorded as
    {"error": ...} so that the others still count."""
    out = {}
    for name, make in makers.items():
        try:
            out[name] = make()
        except Exception as e:  # noqa: BLE001 -- said in the table
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    return out


def copy_bytes(quick):
    return (1 * MIB) if quick else (256 * MIB)


def ipc_bytes(quick):
    return (4 * MIB) if quick else GIB


# Each library: {op: function(quick) -> {variant: {case: value}}}, a
# value in seconds ("time" rows) or GB/s ("bw" rows).  Variants name a
# library's allocators where it has several ("pool", "async").

def gpumem_ops():
    import numpy as np
    import gpumem

    def alloc(quick):
        def one():
            a = gpumem.empty((MIB // 4,), "float32")
            del a
        return {"": {"1MiB": per_call(one, quick=quick)}}

    def copy(quick):
        nbytes = copy_bytes(quick)
        n = nbytes // 4
        dev = gpumem.empty((n,), "float32")
        out = {}
        for kind, host in (("pageable", np.ones(n, np.float32)),
                           ("pinned", gpumem.pinned_empty((n,),
                                                          "float32"))):
            host[:] = 1.0
            out[f"{kind}_h2d"] = copy_rate(lambda: gpumem.copy(dev, host),
                                           nbytes, quick=quick)
            out[f"{kind}_d2h"] = copy_rate(lambda: gpumem.copy(host, dev),
                                           nbytes, quick=quick)
        return {"": out}

    def dlpack(quick):
        try:
            import torch
        except ImportError as e:
            raise Absent(f"PyTorch not importable ({e})")
        a = gpumem.empty((MIB // 4,), "float32")
        t = torch.empty(MIB // 4, dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()
        return {"": {
            "to_torch": per_call(lambda: torch.from_dlpack(a),
                                 quick=quick),
            "from_torch": per_call(lambda: gpumem.from_dlpack(t),
                                   quick=quick)}}

    def pinned(quick):
        def one():
            h = gpumem.pinned_empty((MIB // 4,), "float32")
            del h
        return {"pinned_empty": {"1MiB": per_call(one, quick=quick)}}

    def managed(quick):
        try:
            gpumem.empty((MIB // 4,), "float32", memory="managed")
        except TypeError as e:
            raise Absent(f"gpumem has no managed memory ({e})")

        def one():
            a = gpumem.empty((MIB // 4,), "float32", memory="managed")
            del a
        return {"": {"1MiB": per_call(one, quick=quick)}}

    return dict(alloc=alloc, copy=copy, dlpack=dlpack, pinned=pinned,
                managed=managed)


def cupy_ops():
    import numpy as np
    import cupy
    import cupyx

    sync = cupy.cuda.runtime.deviceSynchronize

    def alloc(quick):
        def one():
            a = cupy.empty(MIB // 4, cupy.float32)
            del a
        return {"MemoryPool": {"1MiB": per_call(one, quick=quick)}}

    def copy(quick):
        nbytes = copy_bytes(quick)
        n = nbytes // 4
        dev = cupy.empty(n, cupy.float32)
        out = {}
        for kind, host in (("pageable", np.ones(n, np.float32)),
                           ("pinned", cupyx.empty_pinned(n, np.float32))):
            host[:] = 1.0

            def up():
                dev.set(host)
                sync()

            def down():
                dev.get(out=host)
                sync()
            out[f"{kind}_h2d"] = copy_rate(up, nbytes, quick=quick)
            out[f"{kind}_d2h"] = copy_rate(down, nbytes, quick=quick)
        return {"": out}

    def dlpack(quick):
        try:
            import torch
        except ImportError as e:
            raise Absent(f"PyTorch not importable ({e})")
        a = cupy.empty(MIB // 4, cupy.float32)
        t = torch.empty(MIB // 4, dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()
        return {"": {
            "to_torch": per_call(lambda: torch.from_dlpack(a),
                                 quick=quick),
            "from_torch": per_call(lambda: cupy.from_dlpack(t),
                                   quick=quick)}}

    def pinned(quick):
        def one():
            p = cupy.cuda.alloc_pinned_memory(MIB)
            del p
        return {"PinnedMemoryPool": {"1MiB": per_call(one, quick=quick)}}

    def managed(quick):
        pool = cupy.cuda.MemoryPool(cupy.cuda.malloc_managed)

        def one():
            p = pool.malloc(MIB)
            del p
        return {"MemoryPool(malloc_managed)": {
            "1MiB": per_call(one, quick=quick)}}

    return dict(alloc=alloc, copy=copy, dlpack=dlpack, pinned=pinned,
                managed=managed)


def torch_ops():
    import torch

    sync = torch.cuda.synchronize

    def alloc(quick):
        def one():
            t = torch.empty(MIB // 4, dtype=torch.float32, device="cuda")
            del t
        return {"caching allocator": {"1MiB": per_call(one,
                                                       quick=quick)}}

    def copy(quick):
        nbytes = copy_bytes(quick)
        n = nbytes // 4
        dev = torch.empty(n, dtype=torch.float32, device="cuda")
        out = {}
        for kind, host in (("pageable", torch.ones(n)),
                           ("pinned", torch.ones(n).pin_memory())):
            def up():
                dev.copy_(host)
                sync()

            def down():
                host.copy_(dev)
                sync()
            out[f"{kind}_h2d"] = copy_rate(up, nbytes, quick=quick)
            out[f"{kind}_d2h"] = copy_rate(down, nbytes, quick=quick)
        return {"": out}

    def dlpack(quick):
        raise Absent("PyTorch is the other side of this row")

    def pinned(quick):
        def one():
            t = torch.empty(MIB // 4, dtype=torch.float32, pin_memory=True)
            del t
        return {"CachingHostAllocator": {"1MiB": per_call(one,
                                                          quick=quick)}}

    def managed(quick):
        raise Absent("PyTorch's Python API allocates no managed memory")

    return dict(alloc=alloc, copy=copy, dlpack=dlpack, pinned=pinned,
                managed=managed)


def host_view(ptr, nbytes):
    """A float32 NumPy array over NBYTES of host memory at PTR."""
    import ctypes
    import numpy as np
    raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
    return np.frombuffer(raw, dtype=np.float32)


def rmm_ops():
    import numpy as np
    import rmm
    import rmm.mr
    from rmm.pylibrmm.stream import DEFAULT_STREAM

    sync = DEFAULT_STREAM.synchronize

    def buffer_alloc(mr, quick):
        def one():
            b = rmm.DeviceBuffer(size=MIB, mr=mr)
            del b
        return {"1MiB": per_call(one, quick=quick)}

    def alloc(quick):
        default = rmm.mr.get_current_device_resource()
        return each_variant({
            f"default ({type(default).__name__})":
                lambda: buffer_alloc(default, quick),
            "CudaAsyncMemoryResource": lambda: buffer_alloc(
                rmm.mr.CudaAsyncMemoryResource(), quick),
            "PoolMemoryResource": lambda: buffer_alloc(
                rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(),
                                          initial_pool_size=64 * MIB),
                quick)})

    def copy(quick):
        nbytes = copy_bytes(quick)
        dev = rmm.DeviceBuffer(size=nbytes)
        pinned_mr = rmm.mr.PinnedHostMemoryResource()
        ptr = pinned_mr.allocate(nbytes)
        out = {}
        try:
            for kind, host in (("pageable", np.ones(nbytes // 4,
                                                    np.float32)),
                               ("pinned", host_view(ptr, nbytes))):
                host[:] = 1.0
                octets = host.view(np.uint8)

                def up():
                    dev.copy_from_host(octets)
                    sync()

                def down():
                    dev.copy_to_host(octets)
                    sync()
                out[f"{kind}_h2d"] = copy_rate(up, nbytes, quick=quick)
                out[f"{kind}_d2h"] = copy_rate(down, nbytes, quick=quick)
        finally:
            pinned_mr.deallocate(ptr, nbytes)
        return {"": out}

    def dlpack(quick):
        if not hasattr(rmm.DeviceBuffer, "__dlpack__"):
            raise Absent("RMM's DeviceBuffer has no __dlpack__ (only "
                         "__cuda_array_interface__) and RMM no from_dlpack")
        raise Absent("RMM has no from_dlpack")

    def host_alloc(mr, quick):
        def one():
            mr.deallocate(mr.allocate(MIB), MIB)
        return {"1MiB": per_call(one, quick=quick)}

    def pinned(quick):
        return each_variant({
            "PinnedHostMemoryResource": lambda: host_alloc(
                rmm.mr.PinnedHostMemoryResource(), quick),
            "PoolMemoryResource(PinnedHostMemoryResource)":
                lambda: host_alloc(rmm.mr.PoolMemoryResource(
                    rmm.mr.PinnedHostMemoryResource(),
                    initial_pool_size=64 * MIB), quick)})

    def managed(quick):
        return each_variant({
            "ManagedMemoryResource": lambda: buffer_alloc(
                rmm.mr.ManagedMemoryResource(), quick),
            "PoolMemoryResource(ManagedMemoryResource)": lambda: buffer_alloc(
                rmm.mr.PoolMemoryResource(rmm.mr.ManagedMemoryResource(),
                                          initial_pool_size=64 * MIB),
                quick)})

    return dict(alloc=alloc, copy=copy, dlpack=dlpack, pinned=pinned,
                managed=managed)


def cuda_core_ops():
    import numpy as np
    from cuda import core
    from cuda.core.utils import StridedMemoryView

    dev = core.Device(0)
    dev.set_current()
    stream = dev.create_stream()

    def mr_alloc(mr, quick):
        def one():
            b = mr.allocate(MIB, stream=stream)
            b.close(stream)
        return {"1MiB": per_call(one, quick=quick)}

    def alloc(quick):
        return {"DeviceMemoryResource": mr_alloc(
            core.DeviceMemoryResource(dev), quick)}

    def copy(quick):
        nbytes = copy_bytes(quick)
        dbuf = core.DeviceMemoryResource(dev).allocate(nbytes, stream=stream)
        pageable = np.ones(nbytes // 4, np.float32)
        pbuf = core.PinnedMemoryResource().allocate(nbytes, stream=stream)
        stream.sync()
        host_view(int(pbuf.handle), nbytes)[:] = 1.0
        out = {}
        for kind, hbuf in (("pageable", core.Buffer.from_handle(
                pageable.ctypes.data, nbytes, owner=pageable)),
                ("pinned", pbuf)):
            def up():
                dbuf.copy_from(hbuf, stream=stream)
                stream.sync()

            def down():
                dbuf.copy_to(hbuf, stream=stream)
                stream.sync()
            out[f"{kind}_h2d"] = copy_rate(up, nbytes, quick=quick)
            out[f"{kind}_d2h"] = copy_rate(down, nbytes, quick=quick)
        pbuf.close(stream)
        dbuf.close(stream)
        stream.sync()
        return {"": out}

    def dlpack(quick):
        try:
            import torch
        except ImportError as e:
            raise Absent(f"PyTorch not importable ({e})")
        buf = core.DeviceMemoryResource(dev).allocate(MIB, stream=stream)
        t = torch.empty(MIB // 4, dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()
        stream.sync()
        default = int(dev.default_stream.handle)
        return {"": {
            "to_torch": per_call(lambda: torch.from_dlpack(buf),
                                 quick=quick),
            "from_torch": per_call(
                lambda: StridedMemoryView.from_dlpack(t, stream_ptr=default),
                quick=quick)}}

    def pinned(quick):
        return {"PinnedMemoryResource": mr_alloc(core.PinnedMemoryResource(),
                                                 quick)}

    def managed(quick):
        return {"ManagedMemoryResource": mr_alloc(
            core.ManagedMemoryResource(), quick)}

    return dict(alloc=alloc, copy=copy, dlpack=dlpack, pinned=pinned,
                managed=managed)


OPS_OF = {"gpumem": gpumem_ops, "cupy": cupy_ops, "torch": torch_ops,
          "rmm": rmm_ops, "cuda.core": cuda_core_ops}


def importable(lib):
    """None where LIB imports, else why not ("No module named 'rmm'")."""
    try:
        __import__(MODULE[lib])
    except Exception as e:  # noqa: BLE001 -- any failure to import
        return f"{type(e).__name__}: {e}" if not isinstance(
            e, ImportError) else str(e)
    return None


def child_ops(lib, ops, quick):
    """Runs OPS of LIB in this process, one JSON line each:
    {"lib", "op", "values": {variant: {case: value}}} or with "absent"
    (the library or its operation is not here) or "error"."""
    why = importable(lib)
    if why:
        for op in ops:
            print(json.dumps({"lib": lib, "op": op, "absent":
                              f"{LABEL[lib]} not importable ({why})",
                              "importable": False}), flush=True)
        return 0
    module = sys.modules[MODULE[lib]]
    version = getattr(module, "__version__", None)
    if lib == "gpumem":
        version = f"{version or '?'}, backend {module.backend}"
    print(json.dumps({"lib": lib, "op": "meta", "version": version}),
          flush=True)
    try:
        table = OPS_OF[lib]()
    except Exception as e:  # noqa: BLE001 -- said in the table
        for op in ops:
            print(json.dumps({"lib": lib, "op": op,
                              "error": f"{type(e).__name__}: {e}"}),
                  flush=True)
        return 1
    status = 0
    for op in ops:
        out = {"lib": lib, "op": op}
        try:
            out["values"] = table[op](quick)
        except Absent as e:
            out["absent"] = str(e)
        except Exception as e:  # noqa: BLE001 -- said in the table
            out["error"] = f"{type(e).__name__}: {e}"
            status = 1
        print(json.dumps(out), flush=True)
    return status


# ---------------------------------------------------------------------------
# IPC: a parent holding 1 GiB, a spawned child opening it.

def ipc_parent(lib, nbytes):
    """(payload object for the child, keep-alive) for LIB's shareable
    NBYTES, filled."""
    if lib == "gpumem":
        import gpumem
        a = gpumem.shared_empty((nbytes // 4,), "float32")
        a.fill(1.0)
        gpumem.synchronize()
        return gpumem.share(a), a
    if lib == "cupy":
        import cupy
        mem = cupy.cuda.Memory(nbytes)            # its own cudaMalloc
        cupy.cuda.runtime.memset(mem.ptr, 1, nbytes)
        cupy.cuda.runtime.deviceSynchronize()
        return cupy.cuda.runtime.ipcGetMemHandle(mem.ptr), mem
    if lib == "torch":
        import torch
        import torch.multiprocessing  # noqa: F401 -- its reductions
        t = torch.ones(nbytes // 4, device="cuda")
        torch.cuda.synchronize()
        return t, t
    if lib == "cuda.core":
        from cuda import core
        dev = core.Device(0)
        dev.set_current()
        stream = dev.create_stream()
        mr = core.DeviceMemoryResource(dev, core.DeviceMemoryResourceOptions(
            ipc_enabled=True, max_size=2 * nbytes))
        buf = mr.allocate(nbytes, stream=stream)
        buf.fill(1, stream=stream)
        stream.sync()
        return (mr, buf), (mr, buf, stream)
    raise Absent(f"{LABEL[lib]}'s Python API has no way to share memory "
                 "with another process")


def ipc_open_and_read(lib, data, nbytes, reps):
    """In the child, its CUDA context made: (seconds of opening the
    pickled DATA, NBYTES, GB/s of copying it into memory of its
    own)."""
    from multiprocessing.reduction import ForkingPickler
    if lib == "gpumem":
        import gpumem
        t = time.perf_counter()
        src = gpumem.open_shared(ForkingPickler.loads(data))
        opened = time.perf_counter() - t
        dst = gpumem.empty(src.shape, src.dtype)
        stream = gpumem.Stream()
        assert src.nbytes == nbytes, (src.nbytes, nbytes)
        start, end = gpumem.Event(), gpumem.Event()

        def timed():
            start.record(stream)
            gpumem.copy(dst, src, stream=stream)
            end.record(stream)
            end.synchronize()
            return start.elapsed_ms(end) * 1e-3
    elif lib == "cupy":
        import cupy
        t = time.perf_counter()
        ptr = cupy.cuda.runtime.ipcOpenMemHandle(ForkingPickler.loads(data))
        opened = time.perf_counter() - t
        dst = cupy.cuda.Memory(nbytes)
        stream = cupy.cuda.Stream(non_blocking=True)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()

        def timed():
            start.record(stream)
            cupy.cuda.runtime.memcpyAsync(dst.ptr, ptr, nbytes, 3,
                                          stream.ptr)
            end.record(stream)
            end.synchronize()
            return cupy.cuda.get_elapsed_time(start, end) * 1e-3
    elif lib == "torch":
        import torch
        import torch.multiprocessing  # noqa: F401 -- its reductions
        t = time.perf_counter()
        src = ForkingPickler.loads(data)
        opened = time.perf_counter() - t
        dst = torch.empty_like(src)
        stream = torch.cuda.Stream()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        assert src.numel() * src.element_size() == nbytes

        def timed():
            with torch.cuda.stream(stream):
                start.record()
                dst.copy_(src)
                end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3
    else:
        from cuda import core
        dev = core.Device(0)
        stream = dev.create_stream()
        t = time.perf_counter()
        _, src = ForkingPickler.loads(data)
        opened = time.perf_counter() - t
        dst = core.DeviceMemoryResource(dev).allocate(nbytes, stream=stream)
        options = core.EventOptions(timing_enabled=True)

        def timed():
            start = stream.record(options=options)
            dst.copy_from(src, stream=stream)
            end = stream.record(options=options)
            end.sync()
            return (end - start) * 1e-3
        assert src.size == nbytes, (src.size, nbytes)
    for _ in range(2):
        timed()
    rate = 2 * nbytes / statistics.median(timed() for _ in range(reps)) / 1e9
    return opened, rate


def make_context(lib):
    """The child's CUDA context, made before the timed open."""
    if lib == "gpumem":
        import gpumem
        gpumem.zeros((1,), "float32")
        gpumem.synchronize()
    elif lib == "cupy":
        import cupy
        cupy.zeros(1)
        cupy.cuda.runtime.deviceSynchronize()
    elif lib == "torch":
        import torch
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    else:
        from cuda import core
        core.Device(0).set_current()


def ipc_child(lib, conn, nbytes, reps):
    try:
        make_context(lib)
        conn.send("ready")
        data = conn.recv_bytes()
        conn.send(ipc_open_and_read(lib, data, nbytes, reps))
    except Exception as e:  # noqa: BLE001 -- sent to the parent
        conn.send(f"{type(e).__name__}: {e}")
    conn.recv()             # the parent's word: the memory may go


def child_ipc(lib, quick):
    """One parent process of the ipc figure: one JSON line."""
    import multiprocessing as mp
    from multiprocessing.reduction import ForkingPickler
    out = {"lib": lib, "op": "ipc"}
    why = importable(lib)
    if why:
        out["absent"] = f"{LABEL[lib]} not importable ({why})"
        print(json.dumps(out), flush=True)
        return 0
    status = 0
    try:
        nbytes = ipc_bytes(quick)
        payload, keep = ipc_parent(lib, nbytes)
        ctx = mp.get_context("spawn")
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=ipc_child,
                           args=(lib, theirs, nbytes, 3 if quick else 10))
        proc.start()
        if mine.poll(300) and mine.recv() == "ready":
            mine.send_bytes(bytes(ForkingPickler.dumps(payload)))
            got = mine.recv() if mine.poll(300) else "no answer in 300 s"
        else:
            got = "the child did not start"
        mine.send("done")
        proc.join(60)
        if isinstance(got, str):
            raise RuntimeError(f"the child: {got}")
        out["values"] = {"": {"open": got[0], "read": got[1]}}
        del keep
    except Absent as e:
        out["absent"] = str(e)
    except Exception as e:  # noqa: BLE001 -- said in the table
        out["error"] = f"{type(e).__name__}: {e}"
        status = 1
    print(json.dumps(out), flush=True)
    return status


# ---------------------------------------------------------------------------
# The driver.

def unpack_wheels(wheels, site):
    """Unpacks every DIR/*.whl into SITE (a wheel is a zip of its
    installed files); returns their names."""
    names = sorted(f for f in os.listdir(wheels) if f.endswith(".whl"))
    os.makedirs(site, exist_ok=True)
    for name in names:
        with zipfile.ZipFile(os.path.join(wheels, name)) as z:
            for member in z.infolist():
                path = z.extract(member, site)
                mode = member.external_attr >> 16
                if mode & 0o111:
                    os.chmod(path, mode & 0o777)
    return names


def path_first(env, folder):
    """A copy of ENV with FOLDER first on its PYTHONPATH."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(env, PYTHONPATH=os.pathsep.join([folder] + rest))


def module_file(folder):
    """gpumem's extension module in FOLDER that this Python can import
    (its own suffix, or the stable ABI's), or None."""
    if not folder:
        return None
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    for name in ("gpumem" + suffix, "gpumem.abi3.so"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def command(lib, args, *rest):
    """The command line of one of LIB's processes: this Python, or for
    gpumem without its module, its program."""
    me = os.path.abspath(__file__)
    if lib == "gpumem" and not args.module:
        return [args.gpumem, "-q", f"--backend={args.backend}", me, *rest]
    return [sys.executable, me, *rest]


def run_child(lib, args, env, rest, timeout):
    """The JSON lines of one of LIB's processes; a crash or a timeout is
    an "error" line for each op it owed."""
    ops = rest[rest.index("--ops") + 1].split(",") if "--ops" in rest \
        else ["ipc"]
    try:
        proc = subprocess.run(command(lib, args, *rest), env=env,
                              capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return [{"lib": lib, "op": op, "error": f"ran past {timeout} s"}
                for op in ops]
    except OSError as e:
        return [{"lib": lib, "op": op, "error": str(e)} for op in ops]
    lines = []
    for line in proc.stdout.splitlines():
        try:
            got = json.loads(line)
        except ValueError:
            continue
        if isinstance(got, dict) and "op" in got:
            lines.append(got)
    seen = {g["op"] for g in lines}
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    for op in ops:
        if op not in seen:
            lines.append({"lib": lib, "op": op, "error":
                          f"exit status {proc.returncode}: {tail[:300]}"})
    return lines


def collect(args, envs):
    """{(lib, op): [result of each process]}, the libraries in turn a
    round, ROUNDS rounds, each with its environment from ENVS."""
    got = {}
    ops = ",".join(OPS)
    rest = ["--child", "", "--ops", ops] + (["--quick"] if args.quick
                                            else [])
    for r in range(args.rounds):
        for lib in args.libs:
            rest[1] = lib
            for res in run_child(lib, args, envs[lib], rest, args.timeout):
                got.setdefault((lib, res["op"]), []).append(res)
            print(f"peers: round {r + 1}, {LABEL[lib]} done",
                  file=sys.stderr, flush=True)
    for r in range(args.rounds):
        for lib in args.libs:
            ipc = ["--child-ipc", lib] + (["--quick"] if args.quick else [])
            for res in run_child(lib, args, envs[lib], ipc, args.timeout):
                got.setdefault((lib, "ipc"), []).append(res)
        print(f"peers: ipc round {r + 1} done", file=sys.stderr, flush=True)
    return got


def cells(results, row):
    """{lib: {"values": {variant: [per-process values]}, "why": str,
    "failed": {variant: error}}} for ROW: a library's processes' values
    per variant, or why it has none (absent, failed), and the variants
    that failed beside others that ran."""
    out = {}
    for lib in LIBS:
        runs = results.get((lib, row.op), [])
        values, why, failed = {}, None, {}
        for res in runs:
            if "absent" in res:
                why = f"not run: {res['absent']}"
            elif "error" in res:
                why = f"failed: {res['error']}"
            for variant, cases in res.get("values", {}).items():
                if row.case in cases:
                    values.setdefault(variant, []).append(cases[row.case])
                elif "error" in cases:
                    why = f"failed: {variant}: {cases['error']}"
                    failed[variant] = cases["error"]
        if not runs:
            why = "not run: left out (--libs)"
        out[lib] = {"values": values, "why": None if values else why,
                    "failed": {v: e for v, e in failed.items()
                               if v not in values}}
    return out


def scale(row, x):
    """The figure as shown: microseconds or GB/s."""
    return x * 1e6 if row.kind == "time" else x


def better(row, a, b):
    return a < b if row.kind == "time" else a > b


def judge(row, table):
    """(verdict line, MET | MISSED | "not run: ...") of ROW: gpumem's
    best variant over the fastest peer variant of the run, on the
    pairs of processes that ran one after the other."""
    unit = "us" if row.kind == "time" else "GB/s"
    mine = table["gpumem"]
    if not mine["values"]:
        why = mine["why"] or "not run: no gpumem figure"
        if why.startswith("not run"):
            return f"- {row.label}: **{why}**", why
        return f"- {row.label}: gpumem {why} **not met**", "MISSED"
    best = None
    for lib in PEERS:
        for variant, vals in table[lib]["values"].items():
            m = statistics.median(vals)
            if best is None or better(row, m, best[0]):
                best = (m, lib, variant, vals)
    absent = [f"{LABEL[lib]} {table[lib]['why']}" for lib in PEERS
              if table[lib]["why"]]
    if best is None:
        why = "not run: no peer measured (" + "; ".join(absent) + ")"
        return f"- {row.label}: **{why}**", why
    gvals = min(mine["values"].values(),
                key=lambda v: statistics.median(v) * (
                    1 if row.kind == "time" else -1))
    g = statistics.median(gvals)
    ratio = paired_ratio(gvals, best[3])
    pairs = sorted(x / y for x, y in zip(gvals, best[3]))
    name = LABEL[best[1]] + (f" {best[2]}" if best[2] else "")
    if row.kind == "time":
        ok, target = ratio <= 1.0, "<= 1.0x its time"
    else:
        ok, target = ratio >= 1.0, ">= 1.0x its bandwidth"
    word = "**met**" if ok else "**not met**"
    # The verdict is the median's; where the pairs fall on both sides of
    # the threshold, the next run may give the other one.
    spread = (f"pairs {pairs[0]:.2f}x-{pairs[-1]:.2f}x"
              + (", within spread" if pairs[0] <= 1.0 <= pairs[-1] else "")
              if len(pairs) > 1 else "one pair")
    text = (f"- {row.label}: gpumem {scale(row, g):.2f} {unit} against the "
            f"fastest peer, {name}, {scale(row, best[0]):.2f} {unit}: "
            f"{ratio:.2f}x ({spread}; target {target}) {word}")
    return text, "MET" if ok else "MISSED"


def cell_text(row, cell):
    """A library's cell of ROW: each variant's median (each process's in
    brackets), or why there is none, cut to 200 characters (the records
    and the log have the whole)."""
    if not cell["values"]:
        why = cell["why"] or "—"
        return why if len(why) <= 200 else why[:199] + "…"
    parts = []
    for variant, vals in cell["values"].items():
        shown = f"{scale(row, statistics.median(vals)):.2f}"
        each = ", ".join(f"{scale(row, v):.2f}" for v in vals)
        label = f"{variant} " if variant else ""
        parts.append(f"{label}{shown} ({each})" if len(vals) > 1
                     else f"{label}{shown}")
    for variant, error in cell.get("failed", {}).items():
        parts.append(f"{variant} failed: {error[:120]}")
    return "; ".join(parts)


def write_table(results, path, header=()):
    """The section's table and verdict lines (bench/report.py includes
    the file and counts the verdicts); returns [(text, verdict)]."""
    lines = list(header)
    versions = []
    for lib in LIBS:
        seen = sorted({str(r.get("version")) for r in results.get(
            (lib, "meta"), [])})
        if seen:
            versions.append(f"{LABEL[lib]} {' / '.join(seen)}")
    if versions:
        lines += ["Versions: " + "; ".join(versions) + ".", ""]
    lines += ["| row | unit | " + " | ".join(LABEL[lib] for lib in LIBS)
              + " |", "| --- | --- |" + " --- |" * len(LIBS)]
    verdicts = []
    for row in ROWS:
        table = cells(results, row)
        unit = "us" if row.kind == "time" else "GB/s"
        lines.append(f"| {row.label} | {unit} | " + " | ".join(
            cell_text(row, table[lib]).replace("|", "/") for lib in LIBS)
            + " |")
        verdicts.append(judge(row, table))
    lines += ["", "Verdicts: gpumem over the fastest of CuPy, PyTorch, RMM "
              "and cuda.core in this run (each library's fastest "
              "allocator where it has several), the median of the ratios "
              "of the processes that ran one after the other; the pairs' "
              "range beside it (\"within spread\": the pairs fall on both "
              "sides of 1.0x, and another run may turn the verdict).", ""]
    lines += [text for text, _ in verdicts]
    absent = sorted({c for lib in PEERS for res in (
        r for (l, _), rs in results.items() if l == lib for r in rs)
        if res.get("importable") is False
        for c in [f"{LABEL[lib]}: {res['absent']}"]})
    if absent:
        lines += ["", "Libraries not here:", ""] + [f"- {a}" for a in absent]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return verdicts


def records(results, path):
    """One JSON line a library's process and operation, as measured."""
    with open(path, "a", encoding="utf-8") as f:
        for (lib, op), runs in sorted(results.items()):
            for i, res in enumerate(runs):
                f.write(json.dumps(dict(res, impl=lib, figure=f"peer_{op}",
                                        process=i)) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="records (JSON lines, appended)")
    parser.add_argument("--table", help="the section's table (Markdown)")
    parser.add_argument("--gpumem", default=os.environ.get("GPUMEM",
                                                           "gpumem"))
    parser.add_argument("--gpumem-module", help="a folder with gpumem's "
                        "extension module for this Python (src/.libs): "
                        "gpumem's processes run under this Python")
    parser.add_argument("--backend", default="cuda",
                        choices=("cuda", "host"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=180,
                        help="seconds one library's process may take")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--libs", default=",".join(LIBS),
                        help="the libraries to run, of "
                        f"{','.join(LIBS)} (default all)")
    parser.add_argument("--wheels", help="unpack DIR/*.whl for the peers")
    parser.add_argument("--site", help="a folder first on the children's "
                        "PYTHONPATH (where --wheels unpacks)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--ops", help=argparse.SUPPRESS)
    parser.add_argument("--child-ipc", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_ops(args.child, args.ops.split(","), args.quick)
    if args.child_ipc:
        return child_ipc(args.child_ipc, args.quick)
    if args.rounds < 1:
        parser.error("--rounds: 1 or more")
    args.libs = [lib for lib in args.libs.split(",") if lib]
    unknown = set(args.libs) - set(LIBS)
    if unknown:
        parser.error(f"--libs: unknown {', '.join(sorted(unknown))}; the "
                     f"libraries: {', '.join(LIBS)}")
    if not args.table:
        parser.error("--table is needed")
    env = dict(os.environ)
    installed = []
    if args.wheels and os.path.isdir(args.wheels):
        site = args.site or os.path.join(os.path.dirname(
            os.path.abspath(args.table)), "peers-site")
        installed = unpack_wheels(args.wheels, site)
        args.site = site
    site_env = path_first(env, args.site) if args.site else env
    # RMM and cuda.core with their site first on PYTHONPATH; CuPy and
    # PyTorch without it (its cuda-bindings and cuda-pathfinder would
    # shadow the ones they were installed with); gpumem with its module's
    # folder first, on the backend asked for.
    args.module = module_file(args.gpumem_module)
    envs = {lib: site_env if lib in SITE_LIBS else env for lib in LIBS}
    if args.module:
        envs["gpumem"] = dict(path_first(env, os.path.dirname(args.module)),
                              GPUMEM_BACKEND=args.backend)
        how = (f"gpumem as its module ({os.path.basename(args.module)}) "
               f"under the peers' Python, {sys.executable}")
    else:
        why = (f"no module for this Python in {args.gpumem_module}"
               if args.gpumem_module else "no --gpumem-module")
        how = f"gpumem under its program {args.gpumem} ({why})"
    start = time.monotonic()
    results = collect(args, envs)
    header = [f"Each library in {args.rounds} processes, in turn; {how}; "
              f"{'--quick sizes: not a measurement; ' if args.quick else ''}"
              f"backend {args.backend}; wheels unpacked: "
              f"{', '.join(installed) or 'none'}; "
              f"{time.monotonic() - start:.0f} s.", ""]
    verdicts = write_table(results, args.table, header)
    if args.out:
        records(results, args.out)
    with open(args.table, encoding="utf-8") as f:
        print(f.read())
    failed = any("error" in r or any(
        "error" in cases for cases in r.get("values", {}).values())
        for runs in results.values() for r in runs)
    met = sum(1 for _, w in verdicts if w == "MET")
    print(f"peers: {met} of {len(verdicts)} rows met")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
