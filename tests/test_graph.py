"""gpumem.graph: calls recorded once and replayed (py-graph.c,
py-graph-record.c; the backends' graph_* entries)."""

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

NDEV = gpumem.device_count()


def need_devices(n):
    if NDEV < n:
        gmtest.skip(f"needs {n} devices, {NDEV} here")


def capture(graph, body):
    """Runs BODY inside `with GRAPH:`."""
    with graph:
        body()


@case
def capture_runs_nothing_and_each_replay_runs_all_in_order():
    n = 1000
    x = gpumem.to_device(np.arange(n, dtype=np.float32))
    y = gpumem.zeros(n)
    host_x = np.arange(n, dtype=np.float32)
    out = np.full(n, -1, np.float32)
    with gpumem.graph(name="saxpy twice") as g:
        gpumem.copy_to_gpu(host_x, x, n)
        gpumem.kernels.saxpy(n, 2.0, x, y)       # y += 2x
        gpumem.kernels.saxpy(n, 1.0, y, y)       # y += y
        gpumem.copy_from_gpu(y, out, n)
    # Recorded, not run.
    assert np.all(out == -1) and np.all(y.copy_to_host() == 0)
    assert g.devices == (0,) and g.host_copies == 2 and "ready" in repr(g)
    expect = np.zeros(n, np.float32)
    for k in range(3):
        host_x[:] = np.arange(n) * (k + 1)       # read at each replay
        g() if k % 2 == 0 else g.replay()
        expect = 2 * (expect + 2 * host_x)
        assert np.array_equal(out, expect), (k, out[:4], expect[:4])
        assert np.array_equal(y.copy_to_host(), expect)


@case
def copies_within_a_device_are_recorded():
    n = 64
    a = gpumem.to_device(np.arange(n, dtype=np.float32))
    b = gpumem.zeros(n)
    out = np.zeros(n, np.float32)
    with gpumem.graph() as g:
        gpumem.copy(b, a)
        gpumem.kernels.saxpy(n, 1.0, a, b)
        gpumem.copy_from_gpu(b, out, n)
    a.copy_from_host(np.ones(n, np.float32))
    g()
    assert np.array_equal(out, np.full(n, 2, np.float32)), out


@case
def one_graph_per_device_all_waited_for():
    need_devices(2)
    n = 100
    xs = [gpumem.to_device(np.full(n, d + 1, np.float32), device=d)
          for d in range(NDEV)]
    ys = [gpumem.zeros(n, device=d) for d in range(NDEV)]
    out = np.zeros((NDEV, n), np.float32)
    with gpumem.graph() as g:
        for d in range(NDEV):
            gpumem.kernels.saxpy(n, 3.0, xs[d], ys[d])
            gpumem.copy_from_gpu(ys[d], out[d], n)
    assert g.devices == tuple(range(NDEV))
    for k in range(1, 4):
        g()
        for d in range(NDEV):
            assert np.all(out[d] == 3 * (d + 1) * k), (k, d, out[d][:3])


@case
def capture_inside_concurrent_and_replay_there():
    need_devices(2)
    n = 16
    xs = [gpumem.to_device(np.full(n, d, np.float32), device=d)
          for d in range(2)]
    out = np.zeros((2, n), np.float32)
    with gpumem.concurrent():
        with gpumem.graph() as g:
            for d in range(2):
                gpumem.copy_from_gpu(xs[d], out[d], n)
        for d in range(2):
            xs[d].fill(d + 7)       # queued in the block, before the replay
        g()
        assert np.all(out[0] == 7) and np.all(out[1] == 8), out


@case
def replays_allocate_nothing():
    n = 40
    img = gpumem.to_device(np.arange(n, dtype=np.float32))
    upd = gpumem.zeros(4)
    part = gpumem.zeros(4)
    host = np.ones(4, np.float32)
    out = np.zeros(4, np.float32)
    with gpumem.graph() as g:
        gpumem.copy_to_gpu(host, upd, 4)
        gpumem.kernels.algo(img, upd, part, n)
        gpumem.copy_from_gpu(part, out, 4)
    g()
    before = gpumem.memory_stats()
    for _ in range(10000):
        g()
    after = gpumem.memory_stats()
    assert before == after, (before, after)
    assert np.allclose(out, 1 + (n - 1) / 2), out


@case
def what_cannot_be_captured_is_refused_by_name():
    a = gpumem.zeros(8)
    host = np.zeros(8, np.float32)
    stream = gpumem.Stream()
    cases = [
        ("allocation", lambda: gpumem.zeros(3)),
        ("allocation", lambda: gpumem.empty(3)),
        ("allocation", lambda: gpumem.to_device(host)),
        ("waits for device", gpumem.synchronize),
        ("stream=", lambda: a.copy_from_host(host, stream=stream)),
        ("stream=", lambda: gpumem.kernels.saxpy(8, 1.0, a, a,
                                                 stream=stream)),
        ("host memory other than",
         lambda: gpumem.copy_to_gpu(host.astype(np.float64), a, 8)),
        ("overlapping", lambda: gpumem.copy(a[1:], a[:7])),
    ]
    if NDEV >= 2:
        b = gpumem.zeros(8, device=1)
        cases.append(("between two devices", lambda: gpumem.copy(b, a)))
        cases.append(("across devices",
                      lambda: gpumem.kernels.saxpy(8, 1.0, b, a)))
    for what, call in cases:
        g = gpumem.graph(name="refusing")
        exc = raises(gpumem.Error, capture, g, call, match=what)
        assert "'refusing'" in str(exc), exc
        # A refused capture keeps nothing.
        raises(RuntimeError, g, match="nothing captured")
    with gpumem.concurrent() as block:
        raises(gpumem.Error, capture, gpumem.graph(), block.wait,
               match="concurrent().wait()")


@case
def graphs_do_not_nest_nor_replay_during_a_capture():
    a = gpumem.zeros(4)
    with gpumem.graph(name="inner") as inner:
        gpumem.kernels.saxpy(4, 1.0, a, a)
    raises(gpumem.Error, capture, gpumem.graph(name="outer"),
           lambda: capture(gpumem.graph(), lambda: None),
           match="do not nest")
    raises(gpumem.Error, capture, gpumem.graph(), inner, match="a replay")
    g = gpumem.graph()
    with g:
        pass
    raises(RuntimeError, g.__enter__, match="captured already")


@case
def an_upload_of_what_a_download_wrote_is_refused():
    a = gpumem.zeros(4)
    b = gpumem.zeros(4)
    host = np.zeros(4, np.float32)

    def body():
        gpumem.copy_from_gpu(a, host, 4)
        gpumem.copy_to_gpu(host, b, 4)
    raises(gpumem.Error, capture, gpumem.graph(), body,
           match="earlier copy of the graph writes")


@case
def arrays_live_with_the_graph_and_free_is_refused():
    a = gpumem.to_device(np.arange(4, dtype=np.float32))
    view = a[1:3]
    out = np.zeros(2, np.float32)
    with gpumem.graph(name="holder") as g:
        gpumem.copy_from_gpu(view, out, 2)
    del view
    raises(gpumem.Error, a.free, match="holder")
    g()
    assert np.array_equal(out, [1, 2]), out
    del g
    a.free()                          # the graph gone, free works


@case
def a_host_copy_of_an_array_freed_by_its_count_is_refused():
    for direction in ("up", "down"):
        a = gpumem.zeros(4)
        host = np.zeros(4, np.float32)

        class Count:
            def __index__(self):
                a.free()              # after the array was read
                return 4

        g = gpumem.graph()

        def body():
            if direction == "up":
                gpumem.copy_to_gpu(host, a, Count())
            else:
                gpumem.copy_from_gpu(a, host, Count())

        raises(ValueError, capture, g, body, match="freed")
        raises(RuntimeError, g, match="nothing captured")


@case
def a_block_that_raises_keeps_nothing():
    a = gpumem.zeros(4)
    g = gpumem.graph()
    try:
        with g:
            gpumem.kernels.saxpy(4, 1.0, a, a)
            raise KeyError("body")
    except KeyError:
        pass
    raises(RuntimeError, g, match="nothing captured")
    a.free()                          # nothing holds it


@case
def a_resized_host_array_is_refused_at_replay():
    a = gpumem.zeros(8)
    for direction in ("up", "down"):
        host = np.zeros((2, 4), np.float32)
        with gpumem.graph() as g:
            if direction == "up":
                gpumem.copy_to_gpu(host[1], a, 4)
            else:
                gpumem.copy_from_gpu(a, host[1], 4)
        g()
        host.resize((4, 4), refcheck=False)
        raises(gpumem.Error, g, match="resized")


@case
def stream_replay_of_device_work():
    a = gpumem.to_device(np.ones(16, dtype=np.float32))
    with gpumem.graph() as g:
        gpumem.kernels.saxpy(16, 1.0, a, a)
    s = gpumem.Stream()
    g(stream=s)
    g.replay(stream=s)
    s.synchronize()
    assert np.all(a.copy_to_host() == 4)
    out = np.zeros(16, np.float32)
    with gpumem.graph() as h:
        gpumem.copy_from_gpu(a, out, 16)
    raises(ValueError, h, stream=s, match="stream=")


@case
def independent_partitions_wait_only_within_their_own():
    # The stitching iteration's shape: one upload every partition reads,
    # then per partition a kernel and a download; partitions share no
    # written memory, so no call of one waits for a call of another.
    n, parts = 256, 4
    update = np.arange(4, dtype=np.float32)
    gpu_update = gpumem.zeros(4)
    images = [gpumem.to_device(np.full(n, i, np.float32))
              for i in range(parts)]
    partial = [gpumem.zeros(4) for _ in range(parts)]
    out = np.zeros((parts, 4), np.float32)
    with gpumem.graph() as g:
        gpumem.copy_to_gpu(update, gpu_update, 4)               # call 0
        for i in range(parts):
            gpumem.kernels.algo_seed(images[i], gpu_update,     # 1 + 3i
                                     partial[i], n)
            gpumem.kernels.saxpy(4, 1.0, gpu_update, partial[i])  # 2 + 3i
            gpumem.copy_from_gpu(partial[i], out[i], 4)         # 3 + 3i
    deps = g.dependencies
    assert len(deps) == 1 + 3 * parts, deps
    assert deps[0] == ()
    for i in range(parts):
        k = 1 + 3 * i
        # The kernel reads the upload; the next call waits for the
        # kernel alone (the upload is reached through it); the download
        # for the call before it.
        assert deps[k] == (0,), (i, deps)
        assert deps[k + 1] == (k,), (i, deps)
        assert deps[k + 2] == (k + 1,), (i, deps)
    g()
    # partial[i] = image value + update, then += update.
    for i in range(parts):
        assert np.array_equal(out[i], i + 2 * update), (i, out[i])


@case
def calls_on_shared_memory_keep_their_order():
    # Write after read and write after write order calls too; a call
    # that reads only what nobody wrote waits for nothing.
    n = 64
    a = gpumem.to_device(np.ones(n, np.float32))
    b = gpumem.zeros(n)
    c = gpumem.zeros(n)
    d = gpumem.zeros(n)
    with gpumem.graph() as g:
        gpumem.kernels.saxpy(n, 1.0, a, b)      # 0: reads a, writes b
        gpumem.kernels.saxpy(n, 1.0, a, c)      # 1: reads a, writes c
        gpumem.copy(a, d)                       # 2: writes a: after 0, 1
        gpumem.kernels.saxpy(n, 2.0, d, b)      # 3: writes b: after 0
        gpumem.copy(c, b)                       # 4: after 1 and 3
    assert g.dependencies == ((), (), (0, 1), (0,), (1, 3)), g.dependencies
    g()
    assert np.all(a.copy_to_host() == 0)
    assert np.all(c.copy_to_host() == 1)
    assert np.all(b.copy_to_host() == 1)


gmtest.main()
