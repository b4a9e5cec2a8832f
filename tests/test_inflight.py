"""free() against calls in flight in other threads (gmpy_array_hold):
copies, kernels and DLPack copies release the GIL while they use an
array's memory; free() from another thread meanwhile must neither crash
nor let the memory be reused before the call ends.  The call finishes
(or raises ValueError), the array is refused from then on, and its memory
goes back when the call ends.  The same race for collectives is in
test_comm_inflight.py (mpirun).

On the CUDA backend the copy is held up by a spin kernel on a user
stream, so the free lands while the copy is certainly in flight; the
spin kernel is only in the test build: run under gpumem, this file starts
itself again under $GPUMEM_TEST.
"""

import gc
import threading
import time

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

gmtest.need_spin_kernel(__file__)

CUDA = gpumem.backend == "cuda"
MiB = 1 << 20


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


@case
def free_during_a_copy_leaves_the_memory_to_it():
    n = 64 * MiB // 4
    host = np.arange(n, dtype=np.float32)
    for trial in range(3):
        base = allocated()
        a = gpumem.zeros(n)
        flag = gpumem.zeros(1, "int32")
        s = gpumem.Stream()
        # CUDA: the staged copy below waits behind 300 ms of the stream
        # (it runs on the legacy default stream), without the GIL.
        gpumem.kernels.spin(300 if CUDA else 0, flag, stream=s)
        thread, outcome = in_thread(a.copy_from_host, host)
        time.sleep(0.1)
        a.free()
        # Same size, same stream: the pool hands out a's memory at once
        # if the free released it; the copy still running would then
        # write into b.
        b = gpumem.zeros(n)
        thread.join()
        assert len(outcome) == 1 and (outcome[0] is None or isinstance(
            outcome[0], ValueError)), outcome
        raises(ValueError, a.copy_to_host)
        got = b.copy_to_host()
        assert not got.any(), f"the copy wrote {np.count_nonzero(got)} " \
                              "elements of a new array"
        del a, b, flag, s
        assert allocated() == base, (allocated(), base)


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
def free_of_a_view_during_a_copy_keeps_the_owner():
    # The view's free drops its owner; the copy holds the owner itself.
    n = 32 * MiB // 4
    base = allocated()
    owner = gpumem.zeros(2 * n)
    view = owner[n:]
    del owner
    flag = gpumem.zeros(1, "int32")
    s = gpumem.Stream()
    gpumem.kernels.spin(300 if CUDA else 0, flag, stream=s)
    host = np.full(n, 3.0, np.float32)
    thread, outcome = in_thread(view.copy_from_host, host)
    time.sleep(0.1)
    view.free()
    b = gpumem.zeros(2 * n)
    thread.join()
    assert len(outcome) == 1 and (outcome[0] is None or isinstance(
        outcome[0], ValueError)), outcome
    assert not b.copy_to_host().any(), "the copy wrote a new array"
    del b, flag, s, view
    assert allocated() == base, (allocated(), base)


@case
def free_before_a_call_is_refused():
    a = gpumem.zeros(16)
    a.free()
    raises(ValueError, gpumem.kernels.saxpy, 16, 1.0, a, gpumem.zeros(16))
    raises(ValueError, a.copy_from_host, np.zeros(16, np.float32))
    raises(ValueError, a.__dlpack__)


gmtest.main()
