"""The benchmark suite's figures through gpumem (bench/NOTES.md).

    gpumem bench/bench_gpumem.py [--quick] [--out FILE] [FIGURE]...

Each timed loop is what a script would write.  The "empty kernel" is
the cheapest registered kernel call: gpumem.kernels.saxpy(0, 0.0, x, x)
with n = 0 on a 1-element array, which checks its arguments and launches
saxpy's kernel <<<1, 256>>> to return at once (stream= for the
asynchronous variant; without it the call waits for the device, as
every gpumem call without a stream does).  Copies without stream= are
synchronous; pageable memory is ordinary NumPy arrays, pinned memory
gpumem.pinned_empty.  The workload is scripts/stitching.py's loop.
Runs on the host backend too (--backend=host), for a smoke test with
--quick.
"""

import sys
import time

import numpy as np

import gpumem
import benchlib as bl
from benchlib import MIB
from benchdriver import Driver


class Gpumem:
    """The timed bodies of the shared figures (bench/benchdriver.py), as
    a gpumem script writes them: gpumem.copy without stream= (complete on
    return) and gpumem.synchronize() for the host copies; stream= and
    CUDA events for the device's own figures."""

    name = "gpumem"
    notes = {
        "host_copy": "gpumem.copy (synchronous) + gpumem.synchronize(); ",
        "pinned": "pinned_empty",
        "sweep_d2d": "gpumem.copy(dst, src, stream=s), events; "
                     "read + write",
        "d2d": "gpumem.copy(dst, src, stream=s), 4 sources rotated; "
               "read + write",
        "algo_bw": "kernels.algo(..., stream=s), 4 inputs rotated; "
                   "bytes read",
        "algo_sweep": "kernels.algo(..., stream=s); bytes read",
        "algo_sweep_d2d": "gpumem.copy(dst, src, stream=s); read + write",
    }

    def __init__(self):
        self.stream = gpumem.Stream()
        self.start, self.end = gpumem.Event(), gpumem.Event()

    def event_time(self, fn, index):
        start, end, stream = self.start, self.end, self.stream
        start.record(stream)
        fn(index)
        end.record(stream)
        end.synchronize()
        return start.elapsed_ms(end) / 1e3

    def empty(self, count):
        return gpumem.empty(count)

    def to_device(self, host):
        return gpumem.to_device(host)

    def pinned_empty(self, count):
        return gpumem.pinned_empty(count, "float32")

    def upload(self, dev, host):
        gpumem.copy(dev, host)

    def download(self, dev):
        back = np.empty(dev.size, np.float32)
        gpumem.copy(back, dev)
        return back

    def partition(self, block, p):
        part = gpumem.empty(block.size)
        gpumem.copy(part, block)
        for _ in range(p):
            gpumem.kernels.saxpy(block.size, 1.0, part, part)   # doubles
        return part

    def settle(self):
        pass                # gpumem's calls without stream= are complete

    def host_copy(self, h2d, dviews, hviews):
        pc = time.perf_counter

        def once(j):
            t0 = pc()
            if h2d:
                gpumem.copy(dviews[j], hviews[j])
            else:
                gpumem.copy(hviews[j], dviews[j])
            gpumem.synchronize()
            return pc() - t0

        return once

    def d2d_pairs(self, pairs, nbytes):
        stream = self.stream

        def copy(j):
            src, dst = pairs[j % len(pairs)]
            gpumem.copy(dst, src, stream=stream)

        return copy

    def d2d_from(self, dst, sources, nbytes):
        stream, k = self.stream, len(sources)

        def copy(j):
            gpumem.copy(dst, sources[j % k], stream=stream)

        return copy

    def algo_from(self, sources, update, partial, n):
        stream, k, algo = self.stream, len(sources), gpumem.kernels.algo

        def run(j):
            algo(sources[j % k], update, partial, n, stream=stream)

        return run

    def seed_call(self, images, update, partial, n):
        stream = self.stream

        def run(i):
            gpumem.kernels.algo_seed(images, update, partial, n,
                                     stream=stream)

        return run


def main(argv):
    args = bl.parse_args(argv, "gpumem bench/bench_gpumem.py")
    results = bl.Results("gpumem", args.out)
    device = gpumem.Device(0)
    results.meta(backend=gpumem.backend, device=device.name,
                 devices=gpumem.device_count(),
                 version=getattr(gpumem, "__version__", "?"),
                 numpy=np.__version__, python=sys.version.split()[0],
                 quick=args.quick, log2n=args.log2n)
    data = bl.WorkloadData(args.log2n)
    pc = time.perf_counter
    lib = Gpumem()
    stream = lib.stream
    driver = Driver(lib, args, results, data)
    partitions = driver.partitions

    def launch():
        saxpy = gpumem.kernels.saxpy
        x = gpumem.to_device(np.ones(1, np.float32))
        batch, reps = (100, 5) if args.quick else (1000, 30)
        sync_reps = 200 if args.quick else 5000
        for _ in range(2 * batch):
            saxpy(0, 0.0, x, x, stream=stream)
        stream.synchronize()
        times = []
        for _ in range(reps):
            t0 = pc()
            for _ in range(batch):
                saxpy(0, 0.0, x, x, stream=stream)
            stream.synchronize()
            times.append((pc() - t0) / batch)
        results.emit("launch", "async", "wall", times,
                     note="kernels.saxpy(0, 0.0, x, x, stream=s) x "
                     f"{batch}, then s.synchronize(); per launch")
        for _ in range(100):
            saxpy(0, 0.0, x, x)
        times = []
        for _ in range(sync_reps):
            t0 = pc()
            saxpy(0, 0.0, x, x)
            times.append(pc() - t0)
        results.emit("launch", "sync", "wall", times,
                     note="kernels.saxpy(0, 0.0, x, x): launch and wait")

    def alloc():
        empty = gpumem.empty
        n = MIB // 4
        reps = 200 if args.quick else 20000
        for _ in range(100):
            empty(n).free()
        times = []
        for _ in range(reps):
            t0 = pc()
            a = empty(n)
            a.free()
            times.append(pc() - t0)
        gpumem.synchronize()
        results.emit("alloc_free", "pool", "wall", times, MIB,
                     note="a = gpumem.empty(262144); a.free()")

    def copy16():
        host = bl.random_block(4, seed=2)
        back = np.empty(4, np.float32)
        dev = gpumem.empty(4)
        reps = 200 if args.quick else 10000
        for case in ("h2d", "d2h"):
            times = []
            for r in range(-100, reps):
                t0 = pc()
                if case == "h2d":
                    gpumem.copy_to_gpu(host, dev, 4)
                else:
                    gpumem.copy_from_gpu(dev, back, 4)
                if r >= 0:
                    times.append(pc() - t0)
            results.emit("copy16", case, "wall", times, 16, 16,
                         note="copy_to_gpu / copy_from_gpu, 4 float32, "
                         "NumPy (pageable) host array")
        if not np.array_equal(host, back):
            raise AssertionError("copy16: the data came back changed")

    def workload_loop(case, kernel_name, images, n, iters, stats, note):
        kernel = getattr(gpumem.kernels, kernel_name)
        update = np.empty(4, np.float32)
        partial = np.empty((4, 4), np.float32)
        gpu_update = gpumem.alloc_gpu_memory(4)
        gpu_partial = [gpumem.alloc_gpu_memory(4) for _ in range(4)]
        stitching = bl.stitching
        warm = max(10, iters // 10)
        times = []
        for r in range(-warm, iters):
            if (r + warm) % bl.RESET_EVERY == 0:
                update[:] = bl.INITIAL_UPDATE
                gpumem.copy_to_gpu(update, gpu_update, 4)
            t0 = pc()
            for i in range(4):
                kernel(images[i], gpu_update, gpu_partial[i], n)
                gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
            stitching(update, partial)
            gpumem.copy_to_gpu(update, gpu_update, 4)
            if r >= 0:
                times.append(pc() - t0)
        results.emit("workload", case, "wall", times, note=note)
        update[:] = bl.INITIAL_UPDATE
        gpumem.copy_to_gpu(update, gpu_update, 4)
        for _ in range(3):
            for i in range(4):
                kernel(images[i], gpu_update, gpu_partial[i], n)
                gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
            stitching(update, partial)
            gpumem.copy_to_gpu(update, gpu_update, 4)
        want = bl.reference_updates(stats, 3, kernel_name)
        bl.check_close(update, want, 1e-5 if kernel_name == "algo" else 1e-6,
                       f"workload {case}")

    def workload():
        small = []
        for part in data.small:
            mem = gpumem.alloc_gpu_memory(10)
            gpumem.copy_to_gpu(part, mem, 10)
            small.append(mem)
        workload_loop("seed_4x10", "algo_seed", small, 10,
                      200 if args.quick else 3000, data.small_last,
                      "kernels.algo_seed, scripts/stitching.py's loop")
        workload_loop("algo_4x2^28", "algo", partitions(), data.n,
                      20 if args.quick else 200, data.means(),
                      "kernels.algo, scripts/stitching.py's loop")

    def graph_loop(case, kernel_name, images, n, iters, stats, note):
        """workload_loop's iteration captured once (gpumem.graph) and
        replayed: as raw.cu's workload_graph."""
        kernel = getattr(gpumem.kernels, kernel_name)
        update = np.empty(4, np.float32)
        partial = np.empty((4, 4), np.float32)
        gpu_update = gpumem.alloc_gpu_memory(4)
        gpu_partial = [gpumem.alloc_gpu_memory(4) for _ in range(4)]
        stitching = bl.stitching
        with gpumem.graph(name=f"bench {case}") as iteration:
            gpumem.copy_to_gpu(update, gpu_update, 4)
            for i in range(4):
                kernel(images[i], gpu_update, gpu_partial[i], n)
                gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
        warm = max(10, iters // 10)
        times, replays = [], []
        for r in range(-warm, iters):
            if (r + warm) % bl.RESET_EVERY == 0:
                update[:] = bl.INITIAL_UPDATE
            t0 = pc()
            iteration()
            t1 = pc()
            stitching(update, partial)
            if r >= 0:
                times.append(pc() - t0)
                replays.append(t1 - t0)
        results.emit("graph", case, "wall", times, note=note)
        results.emit("graph_replay", case, "wall", replays,
                     note="the replay alone: iteration(), its host copies "
                          "and wait")
        update[:] = bl.INITIAL_UPDATE
        for _ in range(3):
            iteration()
            stitching(update, partial)
        want = bl.reference_updates(stats, 3, kernel_name)
        bl.check_close(update, want, 1e-5 if kernel_name == "algo" else 1e-6,
                       f"graph {case}")

    def graph():
        small = []
        for part in data.small:
            mem = gpumem.alloc_gpu_memory(10)
            gpumem.copy_to_gpu(part, mem, 10)
            small.append(mem)
        graph_loop("seed_4x10", "algo_seed", small, 10,
                   200 if args.quick else 3000, data.small_last,
                   "gpumem.graph replayed, scripts/stitching.py --graph")
        graph_loop("algo_4x2^28", "algo", partitions(), data.n,
                   20 if args.quick else 200, data.means(),
                   "gpumem.graph replayed, scripts/stitching.py --graph")

    def loop_sweep():
        """The stitching workload at image counts decades apart, as
        scripts/stitching.py runs it (kernel without stream=, then
        copy_from_gpu, per partition; the stitching; copy_to_gpu), in
        this process on the partitions' first elements; and
        scripts/stitching.py itself where --gpumem names the program."""
        parts = partitions()
        kernel = gpumem.kernels.algo
        update = np.empty(4, np.float32)
        partial = np.empty((4, 4), np.float32)
        gpu_update = gpumem.alloc_gpu_memory(4)
        gpu_partial = [gpumem.alloc_gpu_memory(4) for _ in range(4)]
        stitching = bl.stitching
        for m in bl.loop_counts(args.log2n):
            counts = bl.split_counts(m)
            images = [parts[i][:counts[i]] for i in range(4)]
            times = []
            begin = pc()
            for r in range(2010):
                if r % bl.RESET_EVERY == 0:
                    update[:] = bl.INITIAL_UPDATE
                    gpumem.copy_to_gpu(update, gpu_update, 4)
                t0 = pc()
                for i in range(4):
                    kernel(images[i], gpu_update, gpu_partial[i], counts[i])
                    gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
                stitching(update, partial)
                gpumem.copy_to_gpu(update, gpu_update, 4)
                if r >= 10:
                    times.append(pc() - t0)
                if len(times) >= 20 and pc() - begin > bl.POINT_SECONDS:
                    break
            results.emit("loop_sweep", f"gpumem_{m}", "wall", times, m * 4,
                         note="stitching.py's loop in this process")
        if not args.gpumem:
            return
        import os
        import re
        import subprocess
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              os.pardir, "scripts", "stitching.py")
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = env.get("BENCH_DEVICE", "0")
        for m in bl.loop_counts(args.log2n):
            iters = 2000 if m < 10 ** 7 else 300 if m < 10 ** 8 else 100
            if args.quick:
                iters = 50
            command = [args.gpumem, "-q", "--backend=" + gpumem.backend,
                       script, "--images", str(m), "--iterations",
                       str(iters), "--no-check"]
            done = subprocess.run(command, env=env, capture_output=True,
                                  text=True, timeout=300)
            found = re.search(r"([0-9.]+) us per iteration \(median\)",
                              done.stdout)
            if done.returncode != 0 or found is None:
                raise RuntimeError(f"{' '.join(command)}: exit status "
                                   f"{done.returncode}: "
                                   f"{(done.stdout + done.stderr)[-500:]}")
            median = float(found.group(1)) * 1e-6
            results.emit("loop_sweep", f"script_{m}", "wall", [median],
                         m * 4, note=f"scripts/stitching.py --images {m} "
                         f"--iterations {iters}: its printed median")

    def multigpu():
        """Peer copies between every ordered pair of devices (up to
        16; gpumem.copy, 256 MiB, synchronous), and the stitching workload
        on 1, 2 and all devices (partitions on devices i % D), as calls
        are today: serial."""
        ndev = gpumem.device_count()
        if ndev < 2:
            print(f"gpumem: multigpu: {ndev} device, skipped",
                  file=sys.stderr)
            return
        nbytes = MIB if args.quick else 256 * MIB
        peers = range(min(ndev, 16))
        pairs = [(a, b) for a in peers for b in peers if a != b]
        bufs = [gpumem.zeros(nbytes // 4, device=d) for d in peers]
        reps = 5 if args.quick else 20
        for src, dst in pairs:
            times = []
            for r in range(-3, reps):
                t0 = pc()
                gpumem.copy(bufs[dst], bufs[src])
                gpumem.synchronize()
                if r >= 0:
                    times.append(pc() - t0)
            results.emit("multigpu", f"peer_{src}_{dst}", "wall", times,
                         nbytes, nbytes, note="gpumem.copy(dst on device "
                         f"{dst}, src on device {src}), 256 MiB")
        del bufs
        parts = partitions()
        whole = data.n
        sets = bl.multigpu_sets(ndev)
        copies = {}
        for nd in sets:
            for i in range(4):
                d = i % nd
                if d and (d, i) not in copies:
                    copies[(d, i)] = gpumem.empty(whole, device=d)
                    gpumem.copy(copies[(d, i)], parts[i])
        kernel = gpumem.kernels.algo
        for label, n in (("4x10", 10), ("4x2^28", whole)):
            for nd in sets:
                devs = [i % nd for i in range(4)]
                images = [parts[i] if devs[i] == 0 else copies[(devs[i], i)]
                          for i in range(4)]
                gpu_update = {d: gpumem.alloc_gpu_memory(4, device=d)
                              for d in sorted(set(devs))}
                gpu_partial = [gpumem.alloc_gpu_memory(4, device=devs[i])
                               for i in range(4)]
                update = np.empty(4, np.float32)
                partial = np.empty((4, 4), np.float32)
                times = []
                begin = pc()
                for r in range(2010):
                    if r % bl.RESET_EVERY == 0:
                        update[:] = bl.INITIAL_UPDATE
                        for mem in gpu_update.values():
                            gpumem.copy_to_gpu(update, mem, 4)
                    t0 = pc()
                    for i in range(4):
                        kernel(images[i], gpu_update[devs[i]],
                               gpu_partial[i], n)
                        gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
                    bl.stitching(update, partial)
                    for mem in gpu_update.values():
                        gpumem.copy_to_gpu(update, mem, 4)
                    if r >= 10:
                        times.append(pc() - t0)
                    if len(times) >= 20 and pc() - begin > \
                            2 * bl.POINT_SECONDS:
                        break
                results.emit("multigpu", f"loop_{label}_{nd}gpu_serial",
                             "wall", times, note="stitching.py's loop, "
                             f"partitions on devices {devs}")

    def staging():
        """Pageable copies of 64 KiB to 256 MiB through the staging
        engine (threshold 0, so every size is staged) with chunks sized
        for each copy ("auto") and at several fixed chunk sizes, and
        through plain cudaMemcpy (GPUMEM_COPY_THREADS=0), and uploads
        through cudaMemcpyBatchAsync (GPUMEM_COPY_BATCH=1, "batch"): the
        data for choosing the engine's threshold, chunk and way.  Each
        configuration runs in a child gpumem (the engine reads its
        settings once); the first copies warm the ring and threads."""
        if not args.gpumem:
            print("gpumem: staging needs --gpumem; skipped", file=sys.stderr)
            return
        import json
        import os
        import subprocess
        child = (
            "import json, sys, time\n"
            "import numpy as np, gpumem\n"
            "sizes = json.loads(sys.argv[1]); budget = float(sys.argv[2])\n"
            "big = max(sizes)\n"
            "host = np.random.default_rng(0).integers(1, 255, 2 * big,"
            " dtype=np.uint8)\n"
            "dev = gpumem.empty(2 * big, 'uint8')\n"
            "out = []\n"
            "for n in sizes:\n"
            "    for d in ('h2d', 'd2h'):\n"
            "        def once(j):\n"
            "            o = (j % 2) * big\n"
            "            t = time.perf_counter()\n"
            "            if d == 'h2d':\n"
            "                gpumem.copy(dev[o:o + n], host[o:o + n])\n"
            "            else:\n"
            "                gpumem.copy(host[o:o + n], dev[o:o + n])\n"
            "            return time.perf_counter() - t\n"
            "        once(0); once(1)\n"
            "        times = []; begin = time.perf_counter()\n"
            "        while len(times) < 5 or (len(times) < 100 and\n"
            "                time.perf_counter() - begin < budget):\n"
            "            times.append(once(len(times)))\n"
            "        out.append([d, n, times])\n"
            "print(json.dumps(out))\n")
        chunks = [64, 128] if args.quick else [1024, 2048, 4096, 8192,
                                               16384]
        sizes = ([64 * 1024 << k for k in range(4)] if args.quick
                 else [64 * 1024 << k for k in range(13)])
        configs = [("plain", {"GPUMEM_COPY_THREADS": "0"}),
                   ("auto", {"GPUMEM_COPY_MIN": "0"}),
                   ("batch", {"GPUMEM_COPY_MIN": "0",
                              "GPUMEM_COPY_BATCH": "1"})] + [
            (f"chunk{c}K", {"GPUMEM_COPY_MIN": "0",
                            "GPUMEM_COPY_CHUNK": str(c * 1024)})
            for c in chunks]
        for name, extra in configs:
            env = dict(os.environ, **extra)
            done = subprocess.run(
                [args.gpumem, "-q", "--backend=" + gpumem.backend, "-c",
                 child, json.dumps(sizes), "0.05"], env=env,
                capture_output=True, text=True, timeout=120)
            if (name == "batch" and done.returncode != 0
                    and "needs cudaMemcpyBatchAsync" in done.stderr):
                print("gpumem: staging batch: this build's CUDA has no "
                      "cudaMemcpyBatchAsync; left out", file=sys.stderr)
                continue
            if done.returncode != 0:
                raise RuntimeError(f"staging {name}: {done.stderr[-500:]}")
            for d, n, times in json.loads(done.stdout):
                if name == "batch" and d == "d2h":
                    continue        # GPUMEM_COPY_BATCH takes uploads only
                results.emit("staging", f"{name}_{d}_{n}", "wall", times,
                             n, n, note="gpumem.copy, NumPy memory, " +
                             " ".join(f"{k}={v}" for k, v in extra.items()))

    return results.run(args, {
        "launch": launch, "alloc": alloc, "copy16": copy16,
        "copy256": driver.copy256, "sweep": driver.sweep, "d2d": driver.d2d,
        "algo_bw": driver.algo_bw, "algo_sweep": driver.algo_sweep,
        "loop_sweep": loop_sweep, "workload": workload, "graph": graph,
        "seed_rate": driver.seed_rate, "multigpu": multigpu,
        "staging": staging})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
