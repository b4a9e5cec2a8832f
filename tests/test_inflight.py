"""free() against calls in flight in other threads (gmpy_array_hold):
copies, kernels and DLPack copies release the GIL while they use an
array's memory; free() from another thread meanwhile must neither crash
nor let the memory be reused before the call ends.  The call finishes
(or raises ValueError), the array is refused from then on, and its memory
goes back when the call ends.  The same race for collectives is in
test_comm_inflight.py (mpirun).

The copy cases free the array the moment the copy first lets go of the
GIL (free_mid_call): inside a chunk of a copy of several chunks, or, on
the CUDA backend, inside the wait of a strided copy for a spin kernel
queued before it.  The spin kernel is only in the test build: run under
gpumem, this file starts itself again under $GPUMEM_TEST.
"""

import gc
import sys
import threading
import time

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

gmtest.need_spin_kernel(__file__)

CUDA = gpumem.backend == "cuda"
MiB = 1 << 20
# Copies without a stream move in chunks of this size, without the GIL
# (COPY_CHUNK in src/python/py-copy-engine.c); a copy of more runs in several.
COPY_CHUNK = 256 * MiB


def allocated():
    gc.collect()
    return gpumem.memory_stats()["allocated_bytes"]


def in_thread(fn, *args):
    """Starts FN(*ARGS) in a thread; returns (thread, outcome), OUTCOME a
    list that gets the result or the exception."""
    outcome = []

    def body():
        try:
            outcome.append(fn(*args))
        except BaseException as exc:       # reported by the case
            outcome.append(exc)
    thread = threading.Thread(target=body)
    thread.start()
    return thread, outcome


def free_mid_call(call, victim, then):
    """Runs CALL() in this thread while another thread, the moment CALL
    first lets go of the GIL, frees VICTIM and runs THEN() (which
    allocates what would reuse freed memory).  Returns (outcome, seen):
    OUTCOME is what CALL returned or raised; SEEN has "in_call" (whether
    CALL had not yet returned when the free ran: else the free came too
    late to test anything), "released" (bytes the free gave back at
    once) and "then" (what THEN returned).

    Nothing else takes the GIL from this thread (a switch interval of
    30 s), and the other thread is woken just before CALL: so it runs at
    CALL's first release of the GIL, if it is scheduled by then."""
    go = threading.Event()
    in_call = [False]
    seen = {}

    def freer():
        go.wait()
        seen["in_call"] = in_call[0]
        before = gpumem.memory_stats()["allocated_bytes"]
        victim.free()
        seen["released"] = before - gpumem.memory_stats()["allocated_bytes"]
        seen["then"] = then()
    interval = sys.getswitchinterval()
    thread = threading.Thread(target=freer)
    sys.setswitchinterval(30)
    try:
        thread.start()              # returns with FREER waiting for GO
        in_call[0] = True
        go.set()
        try:
            outcome = call()
        except Exception as exc:    # judged by the case
            outcome = exc
        in_call[0] = False
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    return outcome, seen


def chunked_trials(make, call, remake, check, tries=5):
    """Trials of one free during a copy of several chunks: each makes a
    victim with MAKE(), runs CALL(victim) while free_mid_call frees it
    and runs REMAKE(); where the free landed inside the call, the outcome
    is None or ValueError, the free gave nothing back at once, and
    CHECK(victim, outcome, what REMAKE made) holds; the allocations are
    back where they were after each.  Tried until a free lands inside
    the copy, at most TRIES times; skips the case if none did (a machine
    too loaded to run the other thread in time)."""
    for _ in range(tries):
        base = allocated()
        victim = make()
        gpumem.synchronize()
        outcome, seen = free_mid_call(lambda: call(victim), victim, remake)
        then = seen.pop("then")
        if seen["in_call"]:
            assert outcome is None or isinstance(outcome, ValueError), \
                outcome
            assert seen["released"] == 0, \
                f"free() during the copy gave back {seen['released']} " \
                "bytes at once"
            check(victim, outcome, then)
        del victim, then
        assert allocated() == base, (allocated(), base)
        if seen["in_call"]:
            return
    gmtest.skip(f"in {tries} tries the freeing thread never ran while the "
                "copy was in flight")


@case
def free_during_a_copy_to_the_device_leaves_the_memory_to_it():
    # Two chunks: the free lands in the first, and the copy either stops
    # before the second with ValueError or ends; it never writes into
    # memory that the free handed on.
    n = (COPY_CHUNK + 16 * MiB) // 4
    host = np.arange(1, n + 1, dtype=np.int32)

    def check(a, outcome, new):
        raises(ValueError, a.copy_to_host)
        got = new.copy_to_host()
        assert not got.any(), f"the copy wrote {np.count_nonzero(got)} " \
                              "elements of a new array"
    chunked_trials(lambda: gpumem.zeros(n, "int32"),
                   lambda a: a.copy_from_host(host),
                   lambda: gpumem.zeros(n, "int32"), check)


@case
def free_during_a_copy_to_the_host_leaves_the_memory_to_it():
    # The bytes read are the array's, whatever the free handed on: all
    # of them, or whole chunks and then ValueError.
    n = (COPY_CHUNK + 16 * MiB) // 4
    chunk = COPY_CHUNK // 4
    expect = np.arange(1, n + 1, dtype=np.int32)
    out = np.empty(n, np.int32)

    def make():
        out.fill(-1)
        return gpumem.to_device(expect)

    def check(a, outcome, new):
        wrong = np.flatnonzero(out != expect)
        if outcome is None:
            assert wrong.size == 0, f"{wrong.size} wrong elements"
        else:
            # Stopped at a chunk's end: what came before is right,
            # nothing after was written.
            stop = wrong[0]
            assert stop > 0 and stop % chunk == 0, stop
            assert (out[stop:] == -1).all(), "wrong elements after " \
                                             f"the first {stop}"
    chunked_trials(make, lambda a: a.copy_to_host(out),
                   lambda: gpumem.zeros(n, "int32"), check)


@case
def free_of_a_view_during_a_copy_keeps_the_owner():
    # The view's free drops its owner (the view alone keeps it); the copy
    # holds the owner itself.
    n = (COPY_CHUNK + 16 * MiB) // 4
    host = np.full(n, 3.0, np.float32)

    def check(view, outcome, new):
        assert not new.copy_to_host().any(), "the copy wrote a new array"
    chunked_trials(lambda: gpumem.zeros(n + 1024)[1024:],
                   lambda view: view.copy_from_host(host),
                   lambda: gpumem.zeros(n + 1024), check)


# Strided copies, fill and copy() of views: without a stream each waits
# first for the device's queued work (gmpy_copy_enter), letting other
# threads run, then copies with the GIL held.
STRIDED_CALLS = {
    "a[::2].copy_to_host()": lambda a, host: a[::2].copy_to_host(),
    "a[::2] = host": lambda a, host: a[::2].__setitem__(Ellipsis, host),
    "a.fill(1.5)": lambda a, host: a.fill(1.5),
    "a[::2].fill(1.5)": lambda a, host: a[::2].fill(1.5),
    "a.copy()": lambda a, host: a.copy(),
    "a[::2].copy()": lambda a, host: a[::2].copy(),
    "gpumem.copy(a[::2], a[1::2])":
        lambda a, host: gpumem.copy(a[::2], a[1::2]),
}


@case
def free_during_a_strided_copy_behind_a_kernel_is_refused():
    if not CUDA:
        gmtest.skip("host work is complete when its call returns: a strided "
                    "copy has nothing to wait for and keeps the GIL, so no "
                    "other thread runs during it")
    n = 4 * MiB // 4
    host = np.full(n // 2, 2.0, np.float32)
    unheld = []
    for name, call in STRIDED_CALLS.items():
        # NumPy may release the GIL too (converting a large value) before
        # the copy holds its arrays: a free landing there gives the
        # memory back at once, and the copy must then refuse.  Tried
        # again until the free lands in the copy's wait.
        for _ in range(5):
            if strided_trial(name, call, n, host):
                break
        else:
            unheld.append(name)
    if unheld:
        gmtest.skip(f"in 5 tries the free never landed in the wait of "
                    f"{', '.join(unheld)} (always before it; each then "
                    "refused with ValueError)")


def strided_trial(name, call, n, host):
    """One free of A during CALL(A, HOST) behind a 300 ms spin kernel:
    True if the free landed while the call held A (checked strictly),
    False if it landed before (the call must have refused)."""
    base = allocated()
    a = gpumem.zeros(n)
    flag = gpumem.zeros(1, "int32")
    s = gpumem.Stream()
    # The copy waits 300 ms for the stream (the legacy default stream
    # follows it); the free lands in that wait, or before it.
    gpumem.kernels.spin(300, flag, stream=s)
    outcome, seen = free_mid_call(lambda: call(a, host), a,
                                  lambda: gpumem.zeros(n))
    gpumem.synchronize()
    assert seen["in_call"], f"{name}: the free came after the call"
    assert isinstance(outcome, ValueError), (name, outcome)
    held = seen["released"] == 0
    got = seen.pop("then").copy_to_host()
    assert not got.any(), f"{name} wrote {np.count_nonzero(got)} " \
                          "elements of a new array"
    del a, flag, s, got
    assert allocated() == base, (name, allocated(), base)
    return held


@case
def free_during_a_kernel_leaves_the_memory_to_it():
    base = allocated()
    out = gpumem.zeros(1, "int32")
    # The kernel's wait (no stream) runs without the GIL.
    thread, outcome = in_thread(gpumem.kernels.spin, 300, out)
    time.sleep(0.1)
    out.free()
    b = gpumem.zeros(1, "int32")
    thread.join()
    assert outcome == [None], outcome
    raises(ValueError, out.copy_to_host)
    assert b.copy_to_host()[0] == 0, "the kernel wrote a new array"
    del b
    assert allocated() == base, (allocated(), base)


@case
def free_before_a_call_is_refused():
    a = gpumem.zeros(16)
    a.free()
    raises(ValueError, gpumem.kernels.saxpy, 16, 1.0, a, gpumem.zeros(16))
    raises(ValueError, a.copy_from_host, np.zeros(16, np.float32))
    raises(ValueError, a.__dlpack__)


gmtest.main()
