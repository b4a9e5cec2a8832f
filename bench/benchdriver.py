"""The one benchmark driver of bench_gpumem.py and bench_cupy.py: the
figures both measure the same way (the host copies, the sweep, the
device copies, algo's bandwidth and its sweep, the seed rate), with
their buffers, warm-ups, repetitions, records and checks.

What is timed is never here.  Each library's file gives a LIB object
whose methods make the timed bodies, written as that library's user
would write them, closures over the buffers the driver chose:

    lib.name                              "gpumem", "cupy": the records' impl
    lib.event_time(fn, index)             seconds of fn(index) on lib's
                                          stream, CUDA events around it
    lib.empty(count), lib.to_device(a)    float32 device arrays
    lib.pinned_empty(count)               page-locked float32 host memory
    lib.upload(dev, host), lib.download(dev) -> host
                                          whole copies, complete on return
    lib.partition(block, p)               a device copy of BLOCK x 2^P
    lib.settle()                          waits for the device
    lib.host_copy(h2d, dviews, hviews)    once(j): the seconds of one
                                          synchronous copy of place J
    lib.d2d_pairs(pairs, nbytes)          copy(j): pairs[j % len] src->dst
    lib.d2d_from(dst, sources, nbytes)    copy(j): sources[j % len] -> dst
    lib.algo_from(sources, update, partial, n)
                                          run(j): algo on sources[j % len]
    lib.seed_call(images, update, partial, n)
                                          run(j): one algo_seed call
    lib.notes                             the records' notes, by figure

bench/NOTES.md ("What each implementation runs") says what each body
is; raw.cu measures the same figures in C.
"""

import sys

import numpy as np

import benchlib as bl
from benchlib import MIB


class Driver:
    """The shared figures of LIB (see the module's text) for ARGS
    (benchlib.parse_args), recorded into RESULTS (benchlib.Results),
    on DATA (benchlib.WorkloadData).  Each figure is a method of no
    arguments, as Results.run takes them."""

    def __init__(self, lib, args, results, data):
        self.lib, self.args, self.results, self.data = lib, args, results, data
        self.state = {}

    def arenas(self):
        """(bytes, pageable, pinned, device) float32 arenas of the copy
        figures, made once, all holding the same tiled block."""
        if "arenas" not in self.state:
            lib = self.lib
            nbytes = bl.arena_bytes(self.args)
            count = nbytes // 4
            print(f"{lib.name}: arenas: 3 x {nbytes // MIB} MiB",
                  file=sys.stderr)
            pageable = np.empty(count, np.float32)
            bl.fill_tiled(pageable, self.data.block)
            pinned = lib.pinned_empty(count)
            pinned[:] = pageable
            dev = lib.empty(count)
            lib.upload(dev, pinned)
            lib.settle()
            self.state["arenas"] = (nbytes, pageable, pinned, dev)
        return self.state["arenas"]

    def copy_point(self, figure, size, reps, d2d=False):
        """The four host copies of SIZE bytes (and with D2D the device
        copy), each rotating among the arena's places; REPS repetitions,
        or as many as take about benchlib.POINT_SECONDS where 0."""
        lib, notes = self.lib, self.lib.notes
        nbytes, pageable, pinned, dev = self.arenas()
        n = size // 4
        offsets = bl.slots(nbytes, size)
        dviews = [dev[o:o + n] for o in offsets]
        for case in bl.COPY_CASES:
            is_pinned = case.startswith("pinned")
            host = pinned if is_pinned else pageable
            hviews = [host[o:o + n] for o in offsets]
            once = lib.host_copy(case.endswith("h2d"), dviews, hviews)
            once(0)
            one = once(1 % len(offsets))
            count = reps or bl.adaptive_reps(one)
            times = [once(r % len(offsets)) for r in range(count)]
            self.results.emit(figure, case, "wall", times, size, size,
                              note=notes["host_copy"] + (
                                  notes["pinned"] if is_pinned
                                  else "NumPy array"))
        if not d2d:
            return
        half = nbytes // 2
        offsets = bl.slots(half, size)
        pairs = [(dev[o:o + n], dev[half // 4 + o:half // 4 + o + n])
                 for o in offsets]
        copy = lib.d2d_pairs(pairs, size)
        lib.event_time(copy, 0)
        one = lib.event_time(copy, 1)
        count = reps or bl.adaptive_reps(one)
        times = [lib.event_time(copy, r) for r in range(count)]
        self.results.emit(figure, "d2d", "event", times, size, 2 * size,
                          note=notes["sweep_d2d"])

    def copy256(self):
        size = bl.copy256_bytes(self.args)
        self.copy_point("copy256", size, 5 if self.args.quick else 30)
        nbytes, pageable, pinned, dev = self.arenas()
        n = size // 4
        self.lib.upload(dev[:n], pinned[:n])
        back = self.lib.download(dev[:n])
        if not np.array_equal(back, pinned[:n]):
            raise AssertionError("copy256: the data came back changed")

    def sweep(self):
        for size in bl.sweep_sizes(self.args.sweep_max):
            self.copy_point("sweep", size, 3 if self.args.quick else 0,
                            d2d=True)

    def partitions(self):
        """The workload's 4 partitions of 2^log2n images (partition p
        the block times 2^p, exactly), and a copy target as large."""
        if "parts" not in self.state:
            lib = self.lib
            n = self.data.n
            print(f"{lib.name}: partitions: 4 x {n * 4 // MIB} MiB",
                  file=sys.stderr)
            self.state["parts"] = [lib.partition(self.data.block, p)
                                   for p in range(4)]
            self.state["copy_dst"] = lib.empty(n)
            lib.settle()
        return self.state["parts"]

    def timed_events(self, fn, reps):
        """REPS event times of FN after 3 warm-up calls."""
        for i in range(3):
            self.lib.event_time(fn, i)
        return [self.lib.event_time(fn, i) for i in range(reps)]

    def d2d(self):
        parts = self.partitions()
        nbytes = self.data.n * 4
        copy = self.lib.d2d_from(self.state["copy_dst"], parts, nbytes)
        times = self.timed_events(copy, 5 if self.args.quick else 20)
        self.results.emit("d2d", "1GiB", "event", times, nbytes, 2 * nbytes,
                          note=self.lib.notes["d2d"])

    def algo_bw(self):
        """algo over each partition in turn; checks the last result.
        Returns (parts, update_host, update, partial, reps, want) for a
        library's figures of its own on the same data."""
        parts = self.partitions()
        update_host = bl.random_block(4, seed=3)
        update = self.lib.to_device(update_host)
        partial = self.lib.empty(4)
        reps = 5 if self.args.quick else 20
        n = self.data.n
        run = self.lib.algo_from(parts, update, partial, n)
        times = self.timed_events(run, reps)
        self.results.emit("algo_bw", "2^28", "event", times, n * 4, n * 4,
                          note=self.lib.notes["algo_bw"])
        last = (reps - 1) % 4
        want = (self.data.means()[last]
                + update_host.astype(np.float64)).astype(np.float32)
        bl.check_close(self.lib.download(partial), want, 1e-5, "algo_bw")
        return parts, update, partial, reps, want

    def algo_sweep(self):
        """algo and the device copy per size, from 2^10 floats to a
        partition, over 64 places spread on the partitions."""
        lib, args = self.lib, self.args
        parts = self.partitions()
        update = lib.to_device(bl.random_block(4, seed=3))
        partial = lib.empty(4)
        dst = self.state["copy_dst"]
        reps = 5 if args.quick else 30
        for n in bl.algo_sizes(args.log2n):
            places = [bl.algo_slot(args.log2n, n, j) for j in range(64)]
            views = [parts[p][o:o + n] for p, o in places]
            for case, fn, traffic, note in (
                    ("algo", lib.algo_from(views, update, partial, n),
                     n * 4, lib.notes["algo_sweep"]),
                    ("d2d", lib.d2d_from(dst[:n], views, n * 4), 2 * n * 4,
                     lib.notes["algo_sweep_d2d"])):
                for j in range(3):
                    lib.event_time(fn, j)
                times = [lib.event_time(fn, j) for j in range(reps)]
                self.results.emit("algo_sweep", f"{case}_{n}", "event",
                                  times, n * 4, traffic, note=note)

    def seed_rate(self):
        """One algo_seed call on 2^18 images (one thread walks them)."""
        parts = self.partitions()
        n = min(self.data.n, 1 << 18)
        run = self.lib.seed_call(parts[0], self.lib.to_device(
            np.zeros(4, np.float32)), self.lib.empty(4), n)
        self.lib.event_time(run, 0)
        times = [self.lib.event_time(run, i) for i in range(3)]
        self.results.emit("seed_rate", "2^18", "event", times, n * 4,
                          note=f"one algo_seed call on {n} images")
