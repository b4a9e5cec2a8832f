"""gpumem.comm.send_shared and recv_shared (src/python/py-comm-share.c, comm.c's
messages, comm-mpi.c): a rank hands another rank on its node an array
without a copy (docs/sharing.md, "MPI ranks on one node").

Run by tests/gm-mpi-test.sh as `mpirun -n 4 gpumem test_comm_share.py`,
once plainly and once with GPUMEM_TEST_RANKS_PER_NODE=2, which puts ranks
0-1 and 2-3 on two pretended nodes so that the refusals between nodes
run on one machine.
"""

import gc
import os
import time

import numpy as np

import gmtest
from gmtest import raises

import gpumem

comm = getattr(gpumem, "comm", None)
if comm is None:
    gmtest.skip_file("gpumem was built without MPI")
if comm.size < 2:
    gmtest.skip_file("needs an MPI job of 2 or more ranks (mpirun -n 4)")

RANK, SIZE = comm.rank, comm.size
PER_NODE = int(os.environ.get("GPUMEM_TEST_RANKS_PER_NODE") or SIZE)
# Ranks hand over within their node: to the next rank of the node.
NODE_FIRST = RANK // PER_NODE * PER_NODE
NODE_SIZE = min(PER_NODE, SIZE - NODE_FIRST)
NEXT = NODE_FIRST + (RANK - NODE_FIRST + 1) % NODE_SIZE
PREV = NODE_FIRST + (RANK - NODE_FIRST - 1) % NODE_SIZE
collective_case = gmtest.collective_case


def blocks():
    gc.collect()
    return gpumem.sharing_stats()["blocks"]


@collective_case
def a_ring_of_hand_overs_shares_memory():
    if NODE_SIZE < 2:
        gmtest.skip("a node of one rank")
    mine = gpumem.shared_empty((1000,), dtype="float32")
    mine.copy_from_host(np.full(1000, RANK, np.float32))
    comm.send_shared(mine, NEXT)
    theirs = comm.recv_shared(PREV)
    assert theirs.shape == (1000,) and theirs.dtype == np.float32
    assert np.array_equal(theirs.copy_to_host(), np.full(1000, PREV))
    # The receiver writes into the sender's memory: no copy was made.
    theirs.fill(100 + PREV)
    gpumem.synchronize()
    comm.barrier()
    assert np.array_equal(mine.copy_to_host(), np.full(1000, 100 + RANK))
    del theirs
    comm.barrier()


@collective_case
def views_keep_their_layout():
    if NODE_SIZE < 2:
        gmtest.skip("a node of one rank")
    base = np.arange(60, dtype=np.int64).reshape(6, 10) * (RANK + 1)
    mine = gpumem.shared_empty((6, 10), dtype="int64")
    mine.copy_from_host(base)
    view = mine[1::2, ::-3]
    comm.send_shared(view, NEXT, tag=7)
    comm.send_shared(view.T, NEXT, tag=8)
    got = comm.recv_shared(PREV, tag=7)
    expect = (np.arange(60, dtype=np.int64).reshape(6, 10)
              * (PREV + 1))[1::2, ::-3]
    assert got.shape == expect.shape and got.strides == view.strides
    assert np.array_equal(got.copy_to_host(), expect)
    got_t = comm.recv_shared(PREV, tag=8)
    assert np.array_equal(got_t.copy_to_host(), expect.T)
    del got, got_t
    comm.barrier()


@collective_case
def a_plain_array_goes_by_reference():
    if NODE_SIZE < 2:
        gmtest.skip("a node of one rank")
    plain = gpumem.to_device(np.full(16, RANK, np.int32))
    comm.send_shared(plain, NEXT)
    got = comm.recv_shared(PREV)
    assert np.array_equal(got.copy_to_host(), np.full(16, PREV))
    comm.barrier()
    # The receiver writes the sender's own memory.
    got.fill(100 + RANK)
    gpumem.synchronize()
    comm.barrier()
    assert np.array_equal(plain.copy_to_host(), np.full(16, 100 + NEXT))
    del got
    comm.barrier()


@collective_case
def the_sender_may_drop_its_array_at_once():
    if NODE_SIZE < 2:
        gmtest.skip("a node of one rank")
    before = blocks()
    a = gpumem.shared_empty((256,), dtype="uint8")
    a.copy_from_host(np.full(256, RANK + 1, np.uint8))
    comm.send_shared(a, NEXT)
    del a
    gc.collect()
    got = comm.recv_shared(PREV)
    assert np.array_equal(got.copy_to_host(), np.full(256, PREV + 1))
    del got
    comm.barrier()
    # Every rank let go of both ends: nothing is left of the blocks.  A
    # consumer's close ends its lease when the producer's share server
    # reads the closed connection, on the server's own thread: the count
    # gets there soon after the barrier, not at it.
    deadline = time.monotonic() + 10
    while blocks() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert blocks() == before


@collective_case
def messages_keep_order_per_tag():
    if NODE_SIZE < 2:
        gmtest.skip("a node of one rank")
    arrays = []
    for i in range(3):
        a = gpumem.shared_empty((4,), dtype="int16")
        a.copy_from_host(np.full(4, 10 * RANK + i, np.int16))
        arrays.append(a)
        comm.send_shared(a, NEXT, tag=1)
    b = gpumem.shared_empty((2,), dtype="int16")
    b.copy_from_host(np.full(2, -RANK, np.int16))
    comm.send_shared(b, NEXT, tag=2)
    # Tag 2 is taken first although it was sent last.
    assert np.array_equal(comm.recv_shared(PREV, tag=2).copy_to_host(),
                          np.full(2, -PREV))
    for i in range(3):
        got = comm.recv_shared(PREV, tag=1)
        assert np.array_equal(got.copy_to_host(), np.full(4, 10 * PREV + i))
    del got
    comm.barrier()


@collective_case
def a_rank_hands_itself_an_array():
    a = gpumem.shared_empty((5,), dtype="float64")
    a.copy_from_host(np.arange(5.0) + RANK)
    comm.send_shared(a, RANK, tag=3)
    got = comm.recv_shared(RANK, tag=3)
    assert np.array_equal(got.copy_to_host(), np.arange(5.0) + RANK)
    got.fill(9)
    gpumem.synchronize()
    assert np.array_equal(a.copy_to_host(), np.full(5, 9.0))


@collective_case
def a_sender_that_cannot_share_makes_its_receiver_raise():
    if NODE_SIZE < 2:
        gmtest.skip("a node of one rank")
    raises(TypeError, comm.send_shared, np.zeros(3), NEXT,
           match="DeviceArray or a gpumem.Event")
    raises(gpumem.Error, comm.recv_shared, PREV,
           match=f"rank {PREV} could not share its object: TypeError: ")
    comm.barrier()


@collective_case
def bad_arguments_raise_before_anything_is_sent():
    a = gpumem.shared_empty((2,))
    raises(ValueError, comm.send_shared, a, SIZE, match="not a rank")
    raises(ValueError, comm.send_shared, a, -1, match="not a rank")
    raises(TypeError, comm.send_shared, a, 1.0, match="must be an int")
    raises(TypeError, comm.send_shared, a, True, match="must be an int")
    raises(ValueError, comm.send_shared, a, RANK, tag=-1, match="tag")
    raises(ValueError, comm.send_shared, a, RANK, tag=1 << 15, match="tag")
    raises(TypeError, comm.send_shared, a, RANK, tag="0")
    raises(TypeError, comm.send_shared, a)
    raises(ValueError, comm.recv_shared, SIZE, match="not a rank")
    raises(ValueError, comm.recv_shared, RANK, timeout=-1, match="timeout")
    raises(TypeError, comm.recv_shared, RANK, timeout="1")
    # Nothing was sent to this rank, so nothing is waiting here.
    raises(TimeoutError, comm.recv_shared, RANK, timeout=0.05,
           match="nothing came from rank")


@collective_case
def a_receive_gives_up_after_its_timeout():
    if NODE_SIZE < 2:
        gmtest.skip("a node of one rank")
    t = time.monotonic()
    raises(TimeoutError, comm.recv_shared, PREV, tag=99, timeout=0.2)
    waited = time.monotonic() - t
    assert 0.19 <= waited < 5, waited


@collective_case
def ranks_on_other_nodes_are_refused_on_both_sides():
    if PER_NODE >= SIZE:
        gmtest.skip("every rank is on this node "
                    "(GPUMEM_TEST_RANKS_PER_NODE pretends otherwise)")
    other = (RANK + PER_NODE) % SIZE
    a = gpumem.shared_empty((3,))
    raises(ValueError, comm.send_shared, a, other, match="another node")
    raises(ValueError, comm.recv_shared, other, match="another node")


@collective_case
def an_interprocess_event_is_handed_over():
    if NODE_SIZE < 2:
        gmtest.skip("a node of one rank")
    mine = gpumem.Event(interprocess=True)
    a = gpumem.shared_empty((1 << 16,), dtype="float32")
    a.fill(RANK)
    mine.record()
    comm.send_shared(a, NEXT, tag=4)
    comm.send_shared(mine, NEXT, tag=5)
    got = comm.recv_shared(PREV, tag=4)
    ready = comm.recv_shared(PREV, tag=5)
    assert isinstance(ready, gpumem.Event)
    ready.synchronize()
    assert np.array_equal(got.copy_to_host(), np.full(1 << 16, PREV))
    del got, ready
    comm.barrier()


gmtest.main()
