"""Sharing gpumem.Event between processes on one node
(src/python/py-share-event.c, src/share/share-handle.c's event handles, the backends'
event_export / event_import; docs/sharing.md, "Events").

Run by the gpumem program on the host backend (a shared word the
records count in) and on the cuda backend (CUDA interprocess events).
"""

import multiprocessing
import struct

import numpy as np

import gmtest
from gmtest import FIXED, case, reforge, stats

import gpumem

EVENT_BYTES = FIXED + 64
CUDA = gpumem.backend == "cuda"


def open_here(handle):
    """open_shared(HANDLE) in the process that shared the event: the
    opened Event, or None on CUDA, which opens an event's handle only in
    another process (checked: gpumem.Error saying so)."""
    if CUDA:
        gmtest.raises(gpumem.Error, gpumem.open_shared, handle,
                      match="another process")
        return None
    return gpumem.open_shared(handle)


@case
def an_interprocess_event_shares_and_opens():
    e = gpumem.Event(interprocess=True)
    h = gpumem.share(e)
    assert isinstance(h, bytes) and len(h) == EVENT_BYTES
    assert h[10] == 1                 # the handle's object: an event
    f = open_here(h)
    if f is None:
        gmtest.skip("CUDA opens an event's handle in another process only "
                    "(spawned_children_wait_on_the_parents_event does that)")
    assert isinstance(f, gpumem.Event)
    s = gpumem.Stream()
    a = gpumem.zeros((1 << 16,))
    with s:
        a.fill(2)
        e.record(s)
    gpumem.Stream().wait_event(f)
    f.synchronize()
    assert f.query() is True
    f.record()                        # the consumer records too
    e.synchronize()
    assert (a.copy_to_host() == 2).all()
    gmtest.raises(ValueError, e.elapsed_ms, f)


@case
def timing_is_off_for_interprocess_events():
    gmtest.raises(ValueError, gpumem.Event, interprocess=True, timing=True,
                  match="timing")
    e = gpumem.Event(interprocess=True, timing=False)
    gmtest.raises(ValueError, e.elapsed_ms, e)


@case
def events_not_made_to_share_are_refused():
    for e in (gpumem.Event(), gpumem.Event(timing=False)):
        gmtest.raises(gpumem.Error, gpumem.share, e,
                      match="interprocess=True")
    e = gpumem.Event(interprocess=True)
    f = open_here(gpumem.share(e))
    if f is not None:
        gmtest.raises(gpumem.Error, gpumem.share, f, match="another process")
    # A handle of an event its producer has let go of opens nothing.
    h = gpumem.share(e)
    del e, f
    gmtest.raises(gpumem.Error, gpumem.open_shared, h, match="closed")


@case
def bad_event_handles_are_refused_and_open_nothing():
    e = gpumem.Event(interprocess=True)
    h = gpumem.share(e)
    imports = stats()["imports"]
    bad = {
        "length": h[:-1],
        "checksum": h[:FIXED] + bytes([h[FIXED] ^ 1]) + h[FIXED + 1:],
        "unknown kind of object": reforge(h, 10, b"\x02"),
        "event fields": reforge(h, 7, b"\x03"),
        "another node": reforge(h, 20, b"another-node-boot-id".ljust(39,
                                                                     b"x")),
        "closed": reforge(h, 76, b"\x00" * 8),
        "exited": reforge(h, 12, struct.pack("<I", 0x7ffffff0)),
    }
    for reason, handle in bad.items():
        gmtest.raises(gpumem.Error, gpumem.open_shared, handle, match=reason)
    # An array's handle with the event object byte set has the wrong
    # length for an event.
    a = gpumem.shared_empty((2,))
    gmtest.raises(gpumem.Error, gpumem.open_shared,
                  reforge(gpumem.share(a), 10, b"\x01"), match="length")
    assert stats()["imports"] == imports


@case
def events_leave_nothing_behind():
    before = stats()
    for _ in range(200):
        e = gpumem.Event(interprocess=True)
        f = open_here(gpumem.share(e))
        if f is not None:
            f.record()
        del e, f
    assert stats() == before, (stats(), before)


def child_waits_and_writes(q, done):
    """Waits for the parent's event, doubles the array, records its own
    event for the parent."""
    a, ready, finished = q.get()
    s = gpumem.Stream()
    s.wait_event(ready)
    host = a.copy_to_host()
    a.copy_from_host(host * 2)
    finished.record()
    finished.synchronize()
    done.put(float(host.sum()))
    del a, ready, finished


@case
def spawned_children_wait_on_the_parents_event():
    ctx = multiprocessing.get_context("spawn")
    a = gpumem.shared_empty((1000,))
    ready = gpumem.Event(interprocess=True)
    finished = gpumem.Event(interprocess=True)
    q, done = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=child_waits_and_writes, args=(q, done))
    p.start()
    a.copy_from_host(np.ones(1000, np.float32))
    ready.record()
    q.put((a, ready, finished))
    assert done.get(timeout=60) == 1000.0
    p.join(60)
    assert p.exitcode == 0
    gpumem.Stream().wait_event(finished)
    finished.synchronize()
    assert (a.copy_to_host() == 2).all()


if __name__ == "__main__":
    if gmtest.sanitized():
        gmtest.skip_file("sanitized build: its extension module cannot "
                         "load into an uninstrumented python child")
    gmtest.main()
