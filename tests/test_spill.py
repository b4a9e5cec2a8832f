"""Spilling (src/core/spill.c, src/python/py-spill.c): arrays that
nothing outside gpumem holds move to host memory when an allocation
does not fit, least recently used first, and come back on use.  The
pressure comes from set_memory_limit, so every rule runs on both
backends."""

import os
import subprocess

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

# The case of a return queued on a stream puts the test build's spin
# kernel ahead of it.
gmtest.need_spin_kernel(__file__)

MIB = 1 << 20
N = MIB // 4                     # float32 elements of one MiB
CUDA = gpumem.backend == "cuda"
SPIN_MS = 150 if CUDA else 1


def spill_stats():
    s = gpumem.memory_stats()
    return {k: s[k] for k in ("spilled_bytes", "spilled_blocks", "spills",
                              "spill_bytes", "returns", "return_bytes",
                              "spill_clean_bytes", "spills_without_copy",
                              "spill_exchanges")}


pressure = gmtest.spill_pressure


def spin_flag():
    """The spin kernel's flag, its address read (.ptr): pinned, it never
    moves, so that it takes no part in the room a case makes."""
    flag = gpumem.zeros(1, "int32")
    flag.ptr
    return flag


@case
def bad_arguments():
    raises(ValueError, gpumem.set_spill, True, host_limit=-1)
    raises(TypeError, gpumem.set_spill, True, host_limit="lots")
    raises(ValueError, gpumem.set_spill, True, device=gpumem.device_count())
    a = gpumem.zeros(4)
    raises(ValueError, a[1:].spill)               # views spill with their base


@case
def off_means_out_of_memory():
    used = gpumem.memory_stats()["allocated_bytes"]
    gpumem.set_memory_limit(used + 2 * MIB)
    try:
        a = gpumem.zeros(N)
        b = gpumem.zeros(N)
        raises(gpumem.OutOfMemoryError, gpumem.zeros, N)
        assert not a.is_spilled and not b.is_spilled
    finally:
        gpumem.set_memory_limit(None)


@case
def least_recently_used_moves_and_returns():
    with pressure(3 * MIB):
        a = gpumem.full(N, 1.0, "float32")
        b = gpumem.full(N, 2.0, "float32")
        view = a[10:20]
        c = gpumem.full(N, 3.0, "float32")
        b.fill(5.0)                               # b used after a
        before = spill_stats()
        d = gpumem.full(N, 4.0, "float32")       # a, the oldest, moves
        assert a.is_spilled and view.is_spilled
        assert not b.is_spilled and not c.is_spilled and not d.is_spilled
        after = spill_stats()
        assert after["spilled_bytes"] == before["spilled_bytes"] + MIB
        assert after["spills"] == before["spills"] + 1
        assert after["spill_bytes"] == before["spill_bytes"] + MIB
        # A copy (and a kernel) brings its spilled arguments back first,
        # moving the least recently used other array (c) out of the way.
        np.testing.assert_array_equal(a.copy_to_host(), np.ones(N))
        assert not a.is_spilled and c.is_spilled
        assert spill_stats()["returns"] == before["returns"] + 1
        # Other uses hold other addresses already: no room is made for
        # them, and the message names the way out.
        exc = raises(gpumem.OutOfMemoryError, lambda: float(c[0:1]))
        assert "prefetch" in str(exc), exc
        b.free()                                  # room now
        assert float(c[0:1]) == 3.0 and not c.is_spilled
        np.testing.assert_array_equal(view.copy_to_host(), np.ones(10))
        assert spill_stats()["spilled_bytes"] == before["spilled_bytes"]
        np.testing.assert_array_equal(d.copy_to_host(), np.full(N, 4.0))


@case
def clean_arrays_spill_without_a_copy():
    with pressure(4 * MIB):
        ref = np.arange(N, dtype=np.float32)
        a = gpumem.to_device(ref)
        a.spill()
        before = spill_stats()
        # A read brings it back, and the host bytes stay as its copy.
        np.testing.assert_array_equal(a.copy_to_host(), ref)
        s = spill_stats()
        assert s["spill_clean_bytes"] == before["spill_clean_bytes"] + MIB
        assert s["spilled_bytes"] == before["spilled_bytes"] - MIB
        # Reads leave it clean: a copy's source, a kernel's `in` x.
        out = gpumem.zeros(N)
        gpumem.copy(out, a)
        y = gpumem.zeros(N)
        gpumem.kernels.saxpy(N, 2.0, a, y)
        a.spill()
        s2 = spill_stats()
        assert s2["spills"] == s["spills"] + 1
        assert s2["spills_without_copy"] == s["spills_without_copy"] + 1
        assert s2["spill_bytes"] == s["spill_bytes"], (s, s2)
        np.testing.assert_array_equal(a.copy_to_host(), ref)
        np.testing.assert_array_equal(y.copy_to_host(), 2 * ref)
        # A write ends the copy: the next spill copies, and no byte of
        # the write is lost.
        for write in (lambda: a.fill(7.0),
                      lambda: gpumem.copy(a, out),
                      lambda: gpumem.kernels.saxpy(N, 1.0, y, a),
                      lambda: a.__setitem__(slice(0, 3), 5.0)):
            np.testing.assert_array_equal(a.copy_to_host(),
                                          a.copy_to_host())  # back, clean
            expect = a.copy_to_host()
            write()
            expect = _expected(write, expect, ref, y)
            assert spill_stats()["spill_clean_bytes"] == \
                before["spill_clean_bytes"], "a write kept the clean copy"
            copied = spill_stats()["spill_bytes"]
            a.spill()
            assert spill_stats()["spill_bytes"] == copied + MIB
            np.testing.assert_array_equal(a.copy_to_host(), expect)
            a.spill()


def _expected(write, before, ref, y):
    """What a holds after WRITE of clean_arrays_spill_without_a_copy."""
    code = write.__code__.co_names
    if "fill" in code:
        return np.full(N, 7.0, np.float32)
    if "copy" in code:
        return ref.copy()
    if "saxpy" in code:
        return before + 2 * ref
    got = before.copy()
    got[:3] = 5.0
    return got


@case
def clean_copies_make_way_under_the_host_limit():
    with pressure(4 * MIB):
        gpumem.set_spill(True, host_limit=2 * MIB)
        a = gpumem.full(N, 1.0, "float32")
        b = gpumem.full(N, 2.0, "float32")
        a.spill()
        b.spill()
        a.copy_to_host()
        b.copy_to_host()              # both back, both clean: 2 MiB held
        assert spill_stats()["spill_clean_bytes"] == 2 * MIB
        c = gpumem.full(N, 3.0, "float32")
        c.spill()                     # a dirty spill: a clean copy makes way
        assert spill_stats()["spill_clean_bytes"] == MIB
        for x, v in ((a, 1.0), (b, 2.0), (c, 3.0)):
            np.testing.assert_array_equal(x.copy_to_host(), np.full(N, v))


@case
def small_clean_arrays_stay_while_partitions_move():
    # A loop's small read-only parameter comes back clean once moved;
    # room is taken from arrays that alone cover the need first, clean
    # or not, so it is not moved (and brought back) every step.
    host = [np.full(N, p + 1.0, np.float32) for p in range(4)]
    update = gpumem.zeros(4)
    partial = [gpumem.zeros(4) for _ in range(4)]
    s = gpumem.Stream()
    with pressure(2 * MIB + MIB // 2):
        images = [gpumem.to_device(h) for h in host]
        update.spill()                            # back clean at first use
        for it in range(3):
            before = gpumem.memory_stats()
            for p in range(4):
                gpumem.kernels.algo(images[p], update, partial[p], N)
                images[(p + 1) % 4].prefetch(0, stream=s)
                assert not update.is_spilled
            after = gpumem.memory_stats()
            moved = after["return_bytes"] - before["return_bytes"]
            if it > 0:
                assert moved % MIB == 0 and 0 < moved <= 3 * MIB, moved
        for p in range(4):
            np.testing.assert_allclose(partial[p].copy_to_host(),
                                       np.full(4, p + 1.0))


def stitching_loop(seed, writes, before_step=None, iterations=4):
    """The stitching loop over four partitions of 1 MiB of which two fit,
    spilling on: each iteration runs algo over every partition, after
    negating it in place where WRITES and calling BEFORE_STEP (image)
    where given.  Checks every partial update and at the end every image
    against NumPy; returns each iteration's change of spill_stats()."""
    rng = np.random.default_rng(seed)
    host = [rng.random(N, dtype=np.float32) for _ in range(4)]
    update = gpumem.to_device(np.arange(4, dtype=np.float32))
    partial = [gpumem.zeros(4) for _ in range(4)]
    per_iteration = []
    sign = 1.0
    with pressure(2 * MIB + MIB // 2):
        images = [gpumem.to_device(h) for h in host]
        for _ in range(iterations):
            before = spill_stats()
            if writes:
                sign = -sign
            for p in range(4):
                if before_step is not None:
                    before_step(images[p])
                if writes:
                    gpumem.kernels.saxpy(N, -2.0, images[p], images[p])
                gpumem.kernels.algo(images[p], update, partial[p], N)
            after = spill_stats()
            per_iteration.append({k: after[k] - before[k] for k in after})
            for p in range(4):
                expect = sign * host[p].astype(np.float64).mean()
                np.testing.assert_allclose(partial[p].copy_to_host(),
                                           expect + np.arange(4), rtol=1e-5)
        for p in range(4):
            np.testing.assert_array_equal(images[p].copy_to_host(),
                                          sign * host[p])
    return per_iteration


@case
def a_loop_over_more_than_fits_moves_only_what_does_not_fit():
    # Four read-only partitions, two fit.  The return of a partition
    # that came back before takes the room of the one used last (the
    # one needed last: Belady's choice), so 8 come back in 3 iterations,
    # the least any policy moving whole arrays can (one kept resident
    # for good would bring 3 back every iteration).  A partition never
    # spilled before is written out once; after that nothing is copied
    # out (clean).
    steps = stitching_loop(7, writes=False)
    assert sum(d["returns"] for d in steps[1:4]) == 8, steps
    assert all(d["returns"] <= 3 and d["spill_bytes"] == 0
               for d in steps[2:]), steps


@case
def a_loop_that_writes_moves_only_what_does_not_fit():
    # Four partitions written every iteration, two fit: none is clean
    # when room is made, and the return of a block that came back
    # before takes room from the most recently used first, so at most
    # three come back (and as many are written back) an iteration, 8 in
    # 3 (Belady's least); least recently used would move the one needed
    # next, four each way.
    steps = stitching_loop(11, writes=True)
    moves = [(d["returns"], d["spills"], d["spills_without_copy"])
             for d in steps[1:]]
    assert all(r == n <= 3 and w == 0 for r, n, w in moves), steps
    assert sum(r for r, _, _ in moves) <= 9, steps


@case
def a_loop_over_more_than_fits_exchanges_in_place():
    # Once the loop runs round, every return takes the memory of a
    # partition of its size that spills (an exchange: no allocation,
    # the written one's download and the return's upload at once),
    # with and without a prefetch on a stream; each result is checked
    # against NumPy by stitching_loop.
    s = gpumem.Stream()
    for writes, step in ((False, None), (True, None),
                         (True, lambda image: image.prefetch(0, stream=s))):
        steps = stitching_loop(13, writes=writes, before_step=step)
        assert all(0 < d["returns"] == d["spill_exchanges"] == d["spills"]
                   for d in steps[1:]), (writes, steps)
        # A read-only partition's exchange copies nothing out, once
        # each was written out the first time.
        assert all((d["spill_bytes"] == 0) != writes for d in steps[2:]), \
            (writes, steps)


@case
def an_exchange_follows_the_work_queued_before():
    # The partition that gives its memory is written on another stream
    # behind a spin: its download waits for that write, the return's
    # upload on S for that download, and both keep every byte.
    s, writer = gpumem.Stream(), gpumem.Stream()
    ones = np.ones(N, np.float32)
    with pressure(MIB + MIB // 2):
        flag = spin_flag()
        b = gpumem.to_device(2 * ones)
        b.spill()
        a = gpumem.to_device(ones)
        before = spill_stats()
        gpumem.kernels.spin(SPIN_MS, flag, stream=writer)
        gpumem.kernels.saxpy(N, -2.0, a, a, stream=writer)   # a = -a
        b.prefetch(0, stream=s)
        if CUDA:
            assert not s.query()        # the upload waits behind the spin
        after = spill_stats()
        assert a.is_spilled and not b.is_spilled
        assert after["spill_exchanges"] == before["spill_exchanges"] + 1
        assert after["spill_bytes"] == before["spill_bytes"] + MIB
        np.testing.assert_array_equal(b.copy_to_host(), 2 * ones)
        np.testing.assert_array_equal(a.copy_to_host(), -ones)


@case
def a_prefetch_writes_behind_what_no_exchange_covers():
    # The room for a return that came back before, taken from a written
    # array of another size (no exchange), is copied out on the engine's
    # stream at the prefetch: the spill that makes the room needs no
    # copy of its own.
    s = gpumem.Stream()
    ones = np.ones(N, np.float32)
    with pressure(3 * MIB):
        flag = spin_flag()
        b = gpumem.to_device(ones)
        b.spill()
        b.prefetch(0)                            # came back once
        b.spill()
        a = gpumem.full(2 * N, 4.0, "float32")   # written, twice b's size
        before = spill_stats()
        b.prefetch(0, stream=s)
        s.synchronize()
        after = spill_stats()
        assert a.is_spilled and not b.is_spilled
        assert after["spill_exchanges"] == before["spill_exchanges"]
        assert after["spills_without_copy"] == \
            before["spills_without_copy"] + 1, (before, after)
        assert after["spill_bytes"] == before["spill_bytes"] + 2 * MIB
        np.testing.assert_array_equal(b.copy_to_host(), ones)
        np.testing.assert_array_equal(a.copy_to_host(),
                                      np.full(2 * N, 4.0, np.float32))


@case
def a_view_made_while_spilled():
    with pressure(2 * MIB):
        a = gpumem.to_device(np.arange(N, dtype=np.float32))
        a.spill()
        assert a.is_spilled
        view = a[100:110]
        np.testing.assert_array_equal(view.copy_to_host(),
                                      np.arange(100, 110, dtype=np.float32))


@case
def held_and_exported_arrays_never_move():
    with pressure(3 * MIB):
        a = gpumem.full(N, 1.0, "float32")
        capsule = a.__dlpack__()                  # a DLPack consumer holds it
        b = gpumem.full(N, 2.0, "float32")
        c = gpumem.full(N, 3.0, "float32")
        exc = raises(gpumem.Error, a.spill)
        assert "native code" in str(exc), exc
        d = gpumem.full(N, 4.0, "float32")                   # b moves, not a
        assert not a.is_spilled and b.is_spilled
        del capsule
        a.spill()                                 # no holder now
        assert a.is_spilled
        a.spill()                                 # already: nothing to do
        assert a.is_spilled


@case
def nothing_movable_names_why():
    with pressure(2 * MIB):
        a = gpumem.full(N, 1.0, "float32")
        held = a.__dlpack__()
        b = gpumem.full(N, 2.0, "float32")
        capsule_b = b.__dlpack__()
        exc = raises(gpumem.OutOfMemoryError, gpumem.zeros, N)
        assert "native code" in str(exc), exc
        del held, capsule_b


@case
def free_of_a_spilled_array():
    with pressure(2 * MIB):
        a = gpumem.full(N, 1.0, "float32")
        a.spill()
        spilled = spill_stats()["spilled_bytes"]
        a.free()
        assert spill_stats()["spilled_bytes"] == spilled - MIB
        raises(ValueError, a.copy_to_host)


@case
def host_limit_bounds_spilled_memory():
    with pressure(2 * MIB):
        gpumem.set_spill(True, host_limit=MIB)
        a = gpumem.full(N, 1.0, "float32")
        b = gpumem.full(N, 2.0, "float32")
        c = gpumem.full(N, 3.0, "float32")                   # a moves: 1 MiB on the host
        assert a.is_spilled
        raises(gpumem.OutOfMemoryError, gpumem.full, N, 4.0, "float32")
        assert not b.is_spilled and not c.is_spilled
        # a's return would move b or c, which the host has no room for:
        # nothing moves, and nothing is lost.
        raises(gpumem.OutOfMemoryError, a.prefetch, 0)
        assert a.is_spilled and not b.is_spilled and not c.is_spilled
        for array, value in ((b, 2.0), (c, 3.0), (a, 1.0)):
            np.testing.assert_array_equal(array.copy_to_host(),
                                          np.full(N, value, np.float32))
            array.free()                         # room for a to come back


@case
def environment_turns_it_on():
    code = ("import gpumem; used = gpumem.memory_stats()['allocated_bytes'];"
            "gpumem.set_memory_limit(used + (2 << 20));"
            "a = gpumem.zeros(1 << 18); b = gpumem.zeros(1 << 18);"
            "c = gpumem.zeros(1 << 18); print(a.is_spilled)")
    run = lambda value: subprocess.run(
        [gmtest.GPUMEM, f"--backend={gpumem.backend}", "-q", "-c", code],
        capture_output=True, text=True, env=dict(os.environ,
                                                  GPUMEM_SPILL=value))
    done = run("1")
    assert done.returncode == 0 and done.stdout.strip() == "True", done
    stats = subprocess.run(
        [gmtest.GPUMEM, f"--backend={gpumem.backend}", "-q", "--stats", "-c",
         code], capture_output=True, text=True,
        env=dict(os.environ, GPUMEM_SPILL="1"))
    assert stats.returncode == 0, stats
    assert "device 0: 1 spills (1.0 MiB" in stats.stderr, stats.stderr
    assert "0 returns" in stats.stderr and "0 in place" in stats.stderr, \
        stats.stderr
    done = run("sometimes")
    assert done.returncode != 0 and "GPUMEM_SPILL" in done.stderr, done


@case
def prefetch_makes_room_and_spills():
    # prefetch is a call of its own with the arrays it names: it may move
    # others out of the way, never those; to "host" it spills.
    with pressure(2 * MIB):
        a = gpumem.full(N, 1.0, "float32")
        b = gpumem.full(N, 2.0, "float32")
        a.prefetch("host")
        assert a.is_spilled
        c = gpumem.full(N, 3.0, "float32")        # fills the limit again
        raises(gpumem.OutOfMemoryError, lambda: float(a[0:1]))
        gpumem.prefetch([a], a.device.index if hasattr(a.device, "index")
                        else 0)
        assert not a.is_spilled and b.is_spilled  # b, the older, moved
        np.testing.assert_array_equal(a.copy_to_host(), np.ones(N))
        # a came back and was only read: clean, it moves first (most
        # recently used first among clean ones), without a copy; c,
        # older but dirty, stays.
        without_copy = spill_stats()["spills_without_copy"]
        b.prefetch(0)
        assert not b.is_spilled and a.is_spilled and not c.is_spilled
        assert spill_stats()["spills_without_copy"] == without_copy + 1
        raises(ValueError, a.prefetch, 1) if gpumem.device_count() > 1 \
            else None
        np.testing.assert_array_equal(b.copy_to_host(), np.full(N, 2.0))
        a.prefetch("host")                        # spilled already: nothing
        assert a.is_spilled
        np.testing.assert_array_equal(a.copy_to_host(), np.ones(N))
        np.testing.assert_array_equal(c.copy_to_host(), np.full(N, 3.0))

@case
def prefetch_on_a_stream_queues_the_return():
    # With stream= (or in `with s:`, or in concurrent()) the return is
    # queued on the stream: behind a spin the call comes back with the
    # copy still to run.  A call without stream= sees it; the host bytes
    # stay until it is done (a write, a spill or a free that drops them
    # waits for it).
    s = gpumem.Stream()
    ones = np.ones(N, np.float32)
    with pressure(4 * MIB):
        flag = spin_flag()
        a = gpumem.to_device(ones)
        other = gpumem.full(N, 5.0, "float32")    # written, resident
        a.spill()
        before = spill_stats()
        gpumem.kernels.spin(SPIN_MS, flag, stream=s)
        a.prefetch(0, stream=s)
        assert not a.is_spilled
        if CUDA:
            assert not s.query()              # the copy waits behind the spin
        after = spill_stats()
        assert after["returns"] == before["returns"] + 1, (before, after)
        # A first return writes nothing behind: there was room.
        assert after["spill_bytes"] == before["spill_bytes"], (before, after)
        assert not other.is_spilled
        other.free()
        # The host bytes stay, as the clean copy.
        assert after["spill_clean_bytes"] == MIB, (before, after)
        assert after["spilled_bytes"] == before["spilled_bytes"] - MIB
        np.testing.assert_array_equal(a.copy_to_host(), ones)
        # A write drops the host bytes, once the copy is done.
        a.spill()
        gpumem.kernels.spin(SPIN_MS, flag, stream=s)
        a.prefetch(0, stream=s)
        a.fill(7.0)
        assert spill_stats()["spill_clean_bytes"] == 0
        np.testing.assert_array_equal(a.copy_to_host(), np.full(N, 7.0))
        # A clean spill while the copy runs frees the block behind it.
        a.spill()
        gpumem.kernels.spin(SPIN_MS, flag, stream=s)
        a.prefetch(0, stream=s)
        a.spill()
        assert a.is_spilled
        np.testing.assert_array_equal(a.copy_to_host(), np.full(N, 7.0))
        # The stream of a `with` block, and concurrent()'s.
        a.spill()
        with s:
            a.prefetch(0)
        s.synchronize()
        assert not a.is_spilled
        a.spill()
        with gpumem.concurrent():
            gpumem.prefetch([a], 0)
        np.testing.assert_array_equal(a.copy_to_host(), np.full(N, 7.0))
        # A free while the copy runs.
        b = gpumem.to_device(ones * 2)
        b.spill()
        clean = spill_stats()["spill_clean_bytes"]
        gpumem.kernels.spin(SPIN_MS, flag, stream=s)
        b.prefetch(0, stream=s)
        assert spill_stats()["spill_clean_bytes"] == clean + MIB
        b.free()
        assert spill_stats()["spill_clean_bytes"] == clean
        # Refused before anything moves: a recording, a bad stream.
        a.spill()
        with gpumem.graph():
            raises(gpumem.Error, a.prefetch, 0, match="graph")
        raises(TypeError, a.prefetch, 0, stream="s")
        assert a.is_spilled
        s.synchronize()


@case
def threads_under_pressure_keep_every_byte():
    # Four threads allocate, read, write, copy, export, spill and free
    # their own arrays under a limit that keeps arrays moving, while the
    # others' copies run without the GIL: an array in use by a call or
    # held by a DLPack consumer never moves, an export of a spilled one
    # on a full device raises, and every array reads back what was last
    # written to it.  (check-sanitizers runs it under
    # AddressSanitizer too.)
    import threading
    n = N // 4
    errors = []
    with pressure(3 * MIB):
        before = spill_stats()

        def worker(seed):
            rng = np.random.default_rng(seed)
            mine = []                             # [array, value]
            try:
                for _ in range(200):
                    op = int(rng.integers(7))
                    if op == 0 or not mine:
                        if len(mine) < 6:
                            value = float(rng.integers(1, 1000))
                            mine.append([gpumem.full(n, value, "float32"),
                                         value])
                        continue
                    pick = mine[int(rng.integers(len(mine)))]
                    a, value = pick
                    if op == 1:
                        got = a.copy_to_host()
                        assert np.all(got == value), (got[:4], value)
                    elif op == 2:
                        pick[1] = float(rng.integers(1, 1000))
                        a.fill(pick[1])
                    elif op == 3:
                        other = mine[int(rng.integers(len(mine)))]
                        gpumem.copy(other[0], a)
                        other[1] = value
                    elif op == 4:
                        try:
                            capsule = a.__dlpack__()
                        except gpumem.OutOfMemoryError as exc:
                            # Spilled, and the device full: an export
                            # moves nothing, and names the way out.
                            assert "prefetch" in str(exc), exc
                            assert a.is_spilled
                        else:
                            raises(gpumem.Error, a.spill,
                                   match="native code")
                            del capsule
                    elif op == 5:
                        a.spill()
                        assert a.is_spilled
                    else:
                        a.free()
                        mine.remove(pick)
                for a, value in mine:
                    assert np.all(a.copy_to_host() == value)
            except BaseException as exc:          # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(seed,))
                   for seed in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        after = spill_stats()
        assert after["spills"] > before["spills"], (before, after)
        assert after["returns"] > before["returns"], (before, after)



gmtest.main()
