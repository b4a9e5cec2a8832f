"""Sharing arrays between processes on one node (src/python/py-share.c,
src/share/share-handle.c, src/share/share-server.c, src/host/host-share.c, src/cuda/cuda-share.c;
docs/sharing.md).

Run by the gpumem program on the host backend (shared memory) and on the
cuda backend (an exportable pool).  With the cuda backend a child made by
fork() cannot use CUDA, so the fork cases run on the host backend only.
"""

import multiprocessing
import os
import pickle
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

import gmtest
from gmtest import FIXED, case, reforge, stats

import gpumem

def methods():
    """The start methods whose children can use this backend."""
    if gpumem.backend == "cuda":
        return ["spawn", "forkserver"]
    return ["fork", "spawn", "forkserver"]


def filled(shape, dtype="float32"):
    a = gpumem.shared_empty(shape, dtype=dtype)
    host = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    a.copy_from_host(host)
    return a, host


def wait_for(predicate, limit=10.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@case
def open_in_the_same_process_sees_the_same_memory():
    a, host = filled((4, 6))
    b = gpumem.open_shared(gpumem.share(a))
    assert b.shape == a.shape and b.dtype == a.dtype
    assert b.strides == a.strides and b.device == a.device
    np.testing.assert_array_equal(b.copy_to_host(), host)
    b.fill(7)
    assert (a.copy_to_host() == 7).all()


@case
def views_keep_offset_strides_and_order():
    a, host = filled((5, 8), "int32")
    for view, expect in ((a[1:, ::2], host[1:, ::2]),
                         (a[::-1, 3], host[::-1, 3]),
                         (a[2:4], host[2:4])):
        b = gpumem.open_shared(gpumem.share(view))
        assert b.strides == view.strides, (b.strides, view.strides)
        np.testing.assert_array_equal(b.copy_to_host(), expect)


class ReadOnlyCai:
    """A read-only __cuda_array_interface__ over ARRAY's memory."""

    def __init__(self, array):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": np.dtype(array.dtype).str,
            "data": (array.ptr, True), "strides": None, "version": 3}


def read_only(host):
    """A read-only DeviceArray copy of the NumPy array HOST: a wrapped
    view of read-only memory (DLPack on the host backend, the CUDA Array
    Interface on the cuda backend)."""
    if gpumem.backend == "host":
        host = host.copy()
        host.flags.writeable = False
        try:
            return gpumem.from_dlpack(host)
        except BufferError:
            # NumPy before 1.26 exports no read-only array by DLPack.
            return gpumem.asarray(gpumem.to_device(host), readonly=True)
    return gpumem.asarray(ReadOnlyCai(gpumem.to_device(host)))


@case
def the_read_only_flag_travels():
    a, host = filled((8,))
    # Held: a view of gpumem's own memory shares where it lies, so its
    # memory must outlive the open.
    view = read_only(host)
    h = gpumem.share(view)
    assert h[8] == 1
    ro = gpumem.open_shared(h)
    gmtest.raises(ValueError, gpumem.copy, ro, np.zeros(8, np.float32))
    np.testing.assert_array_equal(ro.copy_to_host(), host)
    assert gpumem.open_shared(gpumem.share(a)).copy_to_host() is not None
    gmtest.raises(gpumem.Error, gpumem.open_shared,
                  reforge(gpumem.share(a), 8, b"\x02"), match="flags")


@case
def empty_and_every_dtype_round_trip():
    for dtype in ("bool", "int8", "uint16", "float16", "float64",
                  "complex128"):
        a = gpumem.shared_empty((3,), dtype=dtype)
        a.copy_from_host(np.ones(3, dtype=dtype))
        b = gpumem.open_shared(gpumem.share(a))
        assert str(b.dtype) == dtype
        np.testing.assert_array_equal(b.copy_to_host(), np.ones(3, dtype))
    e = gpumem.shared_empty((0, 4))
    assert gpumem.open_shared(gpumem.share(e)).shape == (0, 4)


def child_sum(x):
    return float(x.copy_to_host().astype(np.float64).sum())


def child_writes(x):
    x.fill(3)
    gpumem.synchronize()
    return x.shape


@case
def pool_arguments_travel_as_handles():
    a, host = filled((64, 64))
    for method in methods():
        ctx = multiprocessing.get_context(method)
        with ctx.Pool(2) as pool:
            got = pool.map(child_sum, [a, a[::2], a[:, 5]], chunksize=1)
        assert got == [float(host.sum()), float(host[::2].sum()),
                       float(host[:, 5].sum())], (method, got)


@case
def a_child_writes_the_parents_memory():
    for method in methods():
        a, _ = filled((1000,))
        ctx = multiprocessing.get_context(method)
        with ctx.Pool(1) as pool:
            assert pool.apply(child_writes, (a,)) == (1000,)
        assert (a.copy_to_host() == 3).all(), method


def queue_child(q, out):
    x = q.get()
    out.put(child_sum(x))
    del x


@case
def queues_and_pipes_carry_arrays():
    for method in methods():
        ctx = multiprocessing.get_context(method)
        a, host = filled((128,))
        q, out = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=queue_child, args=(q, out))
        p.start()
        q.put(a)
        assert out.get(timeout=60) == float(host.sum())
        p.join(60)
        assert p.exitcode == 0
        left, right = ctx.Pipe()
        left.send(a[10:20])
        got = right.recv()
        np.testing.assert_array_equal(got.copy_to_host(), host[10:20])


def child_writes_index(x):
    x.copy_from_host(np.arange(x.size, dtype=np.float32).reshape(x.shape)
                     + 1)
    gpumem.synchronize()
    return x.shape


@case
def plain_arrays_and_views_share_by_reference():
    # zeros, to_device and views of them share their own memory: a
    # child's writes reach the parent, under every start method.
    for method in methods():
        a = gpumem.zeros((40, 50))
        ctx = multiprocessing.get_context(method)
        expect = np.zeros((40, 50), np.float32)
        with ctx.Pool(1) as pool:
            for index in (np.s_[3:7], np.s_[10:20, ::3], np.s_[::-4, 7]):
                shape = pool.apply(child_writes_index, (a[index],))
                assert shape == expect[index].shape, (method, shape)
                expect[index] = (np.arange(expect[index].size,
                                           dtype=np.float32)
                                 .reshape(expect[index].shape) + 1)
                np.testing.assert_array_equal(a.copy_to_host(), expect)
        plain = gpumem.to_device(np.arange(100, dtype=np.int64))
        with ctx.Pool(1) as pool:
            assert pool.apply(child_writes, (plain,)) == (100,)
        assert (plain.copy_to_host() == 3).all(), method
    # The handle names the array's own memory, not a snapshot.
    plain = gpumem.to_device(np.arange(100, dtype=np.float32))
    h = gpumem.share(plain[10:])
    plain.fill(5)
    assert (gpumem.open_shared(h).copy_to_host() == 5).all()
    # Plain pickle still copies: the loaded array is memory of its own.
    loaded = pickle.loads(pickle.dumps(plain))
    loaded.fill(6)
    assert (plain.copy_to_host() == 5).all()


@case
def a_shared_plain_array_outlives_its_owner_for_its_consumer():
    before = stats()["blocks"]
    plain = gpumem.to_device(np.arange(256, dtype=np.float32))
    view = plain[::2]
    h = gpumem.share(view, until_opened=True)
    assert stats()["blocks"] == before + 1
    # Sharing again reuses the block the first share made.
    gpumem.share(plain)
    assert stats()["blocks"] == before + 1
    plain.free()
    del plain, view
    got = gpumem.open_shared(h)
    np.testing.assert_array_equal(got.copy_to_host(),
                                  np.arange(0, 256, 2, dtype=np.float32))
    del got
    assert wait_for(lambda: stats()["blocks"] == before), stats()
    gmtest.raises(gpumem.Error, gpumem.open_shared, h, match="closed")


@case
def the_limit_applies_to_shared_blocks():
    base = gpumem.memory_stats()
    assert base["shared_bytes"] == 0 and base["shared_blocks"] == 0, base
    gpumem.set_memory_limit(base["allocated_bytes"] + (1 << 20))
    try:
        gmtest.raises(gpumem.OutOfMemoryError, gpumem.shared_empty,
                      (1 << 19,), dtype="float32", match="limit")
        a = gpumem.shared_empty((1 << 17,), dtype="float32")
        now = gpumem.memory_stats()
        assert now["shared_bytes"] == 1 << 19, now
        assert now["shared_blocks"] == 1, now
        assert now["allocated_bytes"] == base["allocated_bytes"] + (1 << 19)
        # A plain array in the books stays counted once when shared.
        b = gpumem.zeros((1 << 16,), dtype="float32")
        gpumem.share(b)
        now = gpumem.memory_stats()
        assert now["shared_bytes"] == (1 << 19) + (1 << 18), now
        assert now["allocated_bytes"] == (base["allocated_bytes"]
                                          + (1 << 19) + (1 << 18)), now
        gmtest.raises(gpumem.OutOfMemoryError, gpumem.shared_empty,
                      (1 << 17,), dtype="float32",
                      match="768.0 KiB of it in 2 blocks shared with other")
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "report.html")
            gpumem.memory_report(path)
            page = open(path).read()
        assert '"shared_now":%d,' % ((1 << 19) + (1 << 18)) in page
        del a, b
    finally:
        gpumem.set_memory_limit(None)
    assert wait_for(lambda: gpumem.memory_stats()["shared_bytes"] == 0)
    after = gpumem.memory_stats()
    assert after["allocated_bytes"] == base["allocated_bytes"], after
    assert after["shared_blocks"] == 0, after


IMPORT_BOOKS = (
    "import json, sys, gpumem\n"
    "gpumem.memory_history(True)\n"
    "n = int(sys.argv[2])\n"
    "def mine(records, snap):\n"
    "    return records[records['owner']\n"
    "                   == snap['owners'].index('imported')]\n"
    "def books():\n"
    "    s = gpumem.memory_stats()\n"
    "    live = mine(gpumem.memory_snapshot()['blocks'],\n"
    "                gpumem.memory_snapshot())\n"
    "    return [s['imported_bytes'], s['owners']['imported']\n"
    "            ['allocated_bytes'], s['allocated_bytes'],\n"
    "            [int(b['size']) for b in live]]\n"
    "h = bytes.fromhex(sys.argv[1])\n"
    "gpumem.set_memory_limit(n - 1)\n"
    "try:\n"
    "    gpumem.open_shared(h)\n"
    "    refused = ''\n"
    "except gpumem.OutOfMemoryError as e:\n"
    "    refused = str(e)\n"
    "gpumem.set_memory_limit(None)\n"
    "b = gpumem.open_shared(h)\n"
    "opened = books()\n"
    "del b\n"
    "closed = books()\n"
    "snap = gpumem.memory_snapshot()\n"
    "actions = [(snap['actions'][e['action']], int(e['size']))\n"
    "           for e in mine(snap['events'], snap)]\n"
    "print(json.dumps([refused, opened, closed, actions]))\n")


def readable_bytes(n):
    """N as gpumem's messages write it beside the figure in bytes."""
    value, unit = float(n), 0
    while value >= 1024.0 and unit < 5:
        value /= 1024.0
        unit += 1
    if unit == 0:
        return f"{n} B"
    return f"{value:.1f} {['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'][unit]}"


@case
def out_of_memory_figures_agree_with_shared_blocks():
    # Every "N bytes (R)" of the out-of-memory message: R is N written
    # readably, also the device's free bytes once shared blocks are
    # named (their figure once took the free figure's place).
    base = gpumem.memory_stats()
    a = gpumem.shared_empty((3 << 16,), dtype="float32")
    gpumem.set_memory_limit(base["allocated_bytes"] + (1 << 20))
    try:
        text = str(gmtest.raises(gpumem.OutOfMemoryError, gpumem.empty,
                                 (1 << 18,), dtype="float32"))
    finally:
        gpumem.set_memory_limit(None)
        del a
    assert "768.0 KiB of it in 1 blocks shared with other" in text, text
    pairs = re.findall(r"(\d+) bytes \(([^)]*)\)", text)
    assert len(pairs) >= 4 and "free of" in text, text
    for figure, readable in pairs:
        assert readable == readable_bytes(int(figure)), (figure, text)


@case
def imported_blocks_are_booked_limited_and_in_the_history():
    a = gpumem.zeros((1 << 14,), dtype="float32")
    n = a.nbytes
    out = subprocess.run([gmtest.GPUMEM, "-c", IMPORT_BOOKS,
                          gpumem.share(a).hex(), str(n)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import json
    refused, opened, closed, actions = json.loads(out.stdout)
    assert "by imported" in refused and "limit" in refused, refused
    assert opened == [n, n, n, [n]], opened
    assert closed == [0, 0, 0, []], closed
    assert actions == [["alloc", n], ["free", n]], actions


@case
def a_freed_producer_array_stays_for_its_consumer():
    a, host = filled((256,))
    h = gpumem.share(a)
    before = stats()["blocks"]
    consumer = subprocess.Popen(
        [gmtest.GPUMEM, "-c",
         "import sys, gpumem\n"
         "b = gpumem.open_shared(bytes.fromhex(sys.argv[1]))\n"
         "print('open', flush=True)\n"
         "sys.stdin.readline()\n"
         "print(float(b.copy_to_host().sum()), flush=True)\n", h.hex()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert consumer.stdout.readline().strip() == "open"
    assert wait_for(lambda: stats()["leases"] >= 1), stats()
    a.free()
    del a
    assert stats()["blocks"] == before  # kept for the lease
    out, _ = consumer.communicate("go\n", timeout=60)
    assert float(out.strip()) == float(host.sum()), out
    assert wait_for(lambda: stats()["blocks"] == before - 1), stats()
    # Closed now: the handle opens nowhere.
    gmtest.raises(gpumem.Error, gpumem.open_shared, h, match="closed")


OPEN_AND_SUM = (
    "import sys, gpumem\n"
    "b = gpumem.open_shared(bytes.fromhex(sys.argv[1]))\n"
    "print(float(b.copy_to_host().sum()), flush=True)\n")


@case
def each_until_opened_handle_keeps_the_block_for_its_consumer():
    a, host = filled((256,))
    handles = [gpumem.share(a, until_opened=True) for _ in range(2)]
    before = stats()["blocks"]
    a.free()
    del a
    assert stats()["blocks"] == before  # kept for two consumers
    for i, h in enumerate(handles):
        # The first consumer opens and closes before the second opens:
        # the block stays for the second all the same.
        consumer = subprocess.run([gmtest.GPUMEM, "-c", OPEN_AND_SUM,
                                   h.hex()], capture_output=True, text=True,
                                  timeout=60)
        assert consumer.returncode == 0, (i, consumer.stderr)
        assert float(consumer.stdout.strip()) == float(host.sum()), i
        assert wait_for(lambda: stats()["leases"] == 0), stats()
    assert wait_for(lambda: stats()["blocks"] == before - 1), stats()
    gmtest.raises(gpumem.Error, gpumem.open_shared, handles[1],
                  match="closed")


@case
def a_consumer_killed_leaves_no_block_behind():
    a, _ = filled((64,))
    h = gpumem.share(a)
    before = stats()["blocks"]
    consumer = subprocess.Popen(
        [gmtest.GPUMEM, "-c",
         "import sys, gpumem, time\n"
         "b = gpumem.open_shared(bytes.fromhex(sys.argv[1]))\n"
         "print('open', flush=True)\n"
         "time.sleep(600)\n", h.hex()],
        stdout=subprocess.PIPE, text=True)
    assert consumer.stdout.readline().strip() == "open"
    assert wait_for(lambda: stats()["leases"] == 1), stats()
    consumer.kill()
    consumer.wait()
    assert wait_for(lambda: stats()["leases"] == 0), stats()
    del a
    assert stats()["blocks"] == before - 1, stats()


PRODUCER = (
    "import sys, time, numpy as np, gpumem\n"
    "a = gpumem.shared_empty((1 << 16,), dtype='int64')\n"
    "a.copy_from_host(np.arange(1 << 16, dtype=np.int64))\n"
    "print(gpumem.share(a).hex(), flush=True)\n"
    "time.sleep(600)\n")

CONSUMER = (
    "import sys, gpumem\n"
    "b = gpumem.open_shared(bytes.fromhex(sys.argv[1]))\n"
    "print('open', flush=True)\n"
    "sys.stdin.readline()\n"
    "try:\n"
    "    print(int(b.copy_to_host().sum()), flush=True)\n"
    "except gpumem.Error as e:\n"
    "    print('error', e, flush=True)\n")


@case
def a_producer_killed_leaves_consumers_whole():
    producer = subprocess.Popen([gmtest.GPUMEM, "-c", PRODUCER],
                                stdout=subprocess.PIPE, text=True)
    handle = bytes.fromhex(producer.stdout.readline().strip())
    consumers = [subprocess.Popen([gmtest.GPUMEM, "-c", CONSUMER,
                                   handle.hex()], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
                 for _ in range(2)]
    for c in consumers:
        assert c.stdout.readline().strip() == "open"
    producer.send_signal(signal.SIGKILL)
    producer.wait()
    expect = (1 << 16) * ((1 << 16) - 1) // 2
    for c in consumers:
        out, _ = c.communicate("go\n", timeout=60)
        # Correct data, or a clear error: never wrong data.
        assert out.strip() == str(expect) or out.startswith("error"), out
        assert c.returncode == 0
    gmtest.raises(gpumem.Error, gpumem.open_shared, handle, match="exited")


PLAIN_PRODUCER = (
    "import sys, time, numpy as np, gpumem\n"
    "a = gpumem.to_device(np.arange(1 << 12, dtype=np.int64))\n"
    "print(gpumem.share(a).hex(), flush=True)\n"
    "time.sleep(600)\n")


def need_cuda(why):
    if gpumem.backend != "cuda":
        gmtest.skip("the host backend " + why)


@case
def imported_pools_of_exited_producers_are_released():
    need_cuda("imports no pools")
    base = stats()["imported_pools"]
    for keep_mapped in (False, True, False):
        producer = subprocess.Popen([gmtest.GPUMEM, "-c", PLAIN_PRODUCER],
                                    stdout=subprocess.PIPE, text=True)
        handle = bytes.fromhex(producer.stdout.readline().strip())
        b = gpumem.open_shared(handle)
        assert int(b.copy_to_host().sum()) == (1 << 12) * ((1 << 12) - 1) // 2
        assert stats()["imported_pools"] == base + 1, stats()
        if not keep_mapped:
            # Kept while its producer lives, for the next handle.
            del b
            assert stats()["imported_pools"] == base + 1, stats()
        producer.kill()
        producer.wait()
        if keep_mapped:
            # A mapped block keeps its pool after the producer exits.
            time.sleep(0.2)
            assert stats()["imported_pools"] == base + 1, stats()
            del b
        assert wait_for(lambda: stats()["imported_pools"] == base), stats()


POOL_CHOICE = (
    "import numpy as np, gpumem\n"
    "a = gpumem.to_device(np.arange(8, dtype=np.float32))\n"
    "h = gpumem.share(a)\n"
    "a.fill(0)\n"
    "print(float(gpumem.open_shared(h).copy_to_host().sum()))\n")


@case
def the_default_pool_stays_selectable():
    need_cuda("has one pool")
    run = lambda env: subprocess.run(
        [gmtest.GPUMEM, "-c", POOL_CHOICE], capture_output=True, text=True,
        timeout=120, env=dict(os.environ, **env))
    # The exportable pool shares by reference; the default pool copies.
    assert run({}).stdout.strip() == "0.0", run({})
    out = run({"GPUMEM_DEVICE_POOL": "exportable"})
    assert out.stdout.strip() == "0.0", out
    out = run({"GPUMEM_DEVICE_POOL": "default"})
    assert out.stdout.strip() == "28.0", out
    for name in ("GPUMEM_DEVICE_POOL", "GPUMEM_SHARE_HANDLE"):
        out = run({name: "bogus"})
        assert out.returncode != 0 and name in out.stderr, out


@case
def fabric_handles_are_refused_until_they_are_safe():
    # On the H200 machines a pool made with fabric handles too cannot
    # export its descriptor (no IMEX channel) and corrupted the heap: the
    # setting is refused at start, naming itself and why
    # (docs/sharing.md).
    need_cuda("reads GPUMEM_SHARE_HANDLE")
    out = subprocess.run(
        [gmtest.GPUMEM, "-c", "import gpumem; gpumem.shared_empty((16,))"],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, GPUMEM_SHARE_HANDLE="fabric"))
    assert out.returncode == 3, (out.returncode, out.stderr)
    assert "GPUMEM_SHARE_HANDLE=fabric is not supported" in out.stderr, \
        out.stderr
    assert "IMEX" in out.stderr, out.stderr


FRAMEWORK_PRODUCER = {
    "torch": (
        "gpumem.use_pool('torch')\n"
        "import torch\n"
        "try:\n"
        "    gpumem.share(torch.ones(4))\n"
        "    print('shared a host tensor', flush=True)\n"
        "except TypeError:\n"
        "    print('refused', flush=True)\n"
        "t = torch.arange(1 << 20, dtype=torch.float32, device='cuda')\n"
        "sync = torch.cuda.synchronize\n"
        "total = lambda x: float(x.sum().item())\n"),
    "cupy": (
        "import cupy\n"
        "c0 = cupy.ones(4)\n"
        "try:\n"
        "    gpumem.share(c0)\n"
        "    print('shared memory outside the pool', flush=True)\n"
        "except gpumem.Error as e:\n"
        "    print('refused' if \"gpumem's pool\" in str(e) else e,\n"
        "          flush=True)\n"
        "gpumem.use_pool('cupy')\n"
        "t = cupy.arange(1 << 20, dtype=cupy.float32)\n"
        "sync = cupy.cuda.runtime.deviceSynchronize\n"
        "total = lambda x: float(x.sum())\n"),
}

FRAMEWORK_SHARE = (
    "sync()\n"
    "print(gpumem.share(t[16:]).hex(), flush=True)\n"
    "sys.stdin.readline()\n"
    "sync()\n"
    "print(total(t[16:32]), flush=True)\n"
    "del t\n"
    "gc.collect()\n"
    "sync()\n"
    "print(gpumem.sharing_stats()['blocks'], flush=True)\n"
    "sys.stdin.readline()\n"
    "end = time.monotonic() + 20\n"
    "while gpumem.sharing_stats()['blocks'] and time.monotonic() < end:\n"
    "    time.sleep(0.02)\n"
    "print(gpumem.sharing_stats()['blocks'], flush=True)\n")


def framework_array_shares(library):
    need_cuda("has no pool for other libraries")
    import importlib.util
    if importlib.util.find_spec(library) is None:
        gmtest.skip(library + " is not importable")
    script = ("import gc, sys, time, gpumem\n" + FRAMEWORK_PRODUCER[library]
              + FRAMEWORK_SHARE)
    producer = subprocess.Popen([gmtest.GPUMEM, "-c", script],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    try:
        assert producer.stdout.readline().strip() == "refused"
        b = gpumem.open_shared(bytes.fromhex(producer.stdout.readline()))
        assert b.shape == ((1 << 20) - 16,) and str(b.dtype) == "float32"
        np.testing.assert_array_equal(b[:4].copy_to_host(), [16, 17, 18, 19])
        b[:16].fill(1)
        gpumem.synchronize()
        producer.stdin.write("wrote\n")
        producer.stdin.flush()
        # The producer's tensor sees the consumer's writes.
        assert float(producer.stdout.readline()) == 16.0
        # Its library freed it; the consumer's lease keeps the block.
        assert producer.stdout.readline().strip() == "1"
        np.testing.assert_array_equal(b[16:20].copy_to_host(),
                                      [32, 33, 34, 35])
        del b
        producer.stdin.write("closed\n")
        producer.stdin.flush()
        assert producer.stdout.readline().strip() == "0"
        assert producer.wait(60) == 0
    finally:
        if producer.poll() is None:
            producer.kill()


@case
def a_torch_tensor_of_gpumems_pool_shares_by_reference():
    framework_array_shares("torch")


@case
def a_cupy_array_of_gpumems_pool_shares_by_reference():
    framework_array_shares("cupy")


@case
def bad_handles_are_refused_and_map_nothing():
    a, _ = filled((16,))
    h = gpumem.share(a)
    imports = stats()["imports"]
    bad = {
        "not a gpumem share handle": b"nonsense",
        "checksum": h[:100] + bytes([h[100] ^ 1]) + h[101:],
        "length": h[:-1],
        "another version": reforge(h, 4, b"\x09\x00"),
        "another node": reforge(h, 20, b"another-node-boot-id".ljust(39, b"x")),
        "cannot see": reforge(h, 84, b"\xee" * 16),
        "closed": reforge(h, 76, b"\x00" * 8),
        "reach outside": reforge(h, FIXED - 8, struct.pack("<q", 17)),
        "exited": reforge(h, 12, struct.pack("<I", 0x7ffffff0)),
    }
    for reason, handle in bad.items():
        gmtest.raises(gpumem.Error, gpumem.open_shared, handle, match=reason)
    gmtest.raises(TypeError, gpumem.open_shared, 12)
    gmtest.raises(TypeError, gpumem.share, np.zeros(3))
    assert stats()["imports"] == imports


@case
def many_exports_opens_and_closes_leave_nothing():
    before = stats()
    maps = len(open("/proc/self/maps").read().splitlines())
    free_before = gpumem.Device(0).mem_info()[0] if gpumem.backend == "cuda" else 0
    fds = len(os.listdir("/proc/self/fd"))
    books = gpumem.memory_stats()
    for i in range(2000):
        if i % 4 == 3:
            a = gpumem.zeros((256,), dtype="uint8")   # shared where it lies
        else:
            a = gpumem.shared_empty((256,), dtype="uint8")
        b = gpumem.open_shared(gpumem.share(a))
        c = gpumem.open_shared(gpumem.share(b[1:])) if i % 2 else None
        del a, b, c
    assert stats() == before, (stats(), before)
    assert len(os.listdir("/proc/self/fd")) <= fds, fds
    after = gpumem.memory_stats()
    for key in ("allocated_bytes", "shared_bytes", "imported_bytes",
                "allocations"):
        assert after[key] == books[key], (key, after[key], books[key])
    assert len(open("/proc/self/maps").read().splitlines()) <= maps + 2
    if gpumem.backend == "cuda":
        gpumem.synchronize()
        assert gpumem.Device(0).mem_info()[0] >= free_before - (64 << 20)


@case
def reopening_a_seen_handle_is_quick():
    a, _ = filled((1 << 10,))
    h = gpumem.share(a)
    gpumem.open_shared(h)
    start = time.perf_counter()
    for _ in range(200):
        gpumem.open_shared(h)
    per_open = (time.perf_counter() - start) / 200
    assert per_open < 1e-3, per_open


if __name__ == "__main__":
    if gmtest.sanitized():
        gmtest.skip_file("sanitized build: its extension module cannot "
                         "load into an uninstrumented python child")
    gmtest.main()
