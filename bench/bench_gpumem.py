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
    stream = gpumem.Stream()
    start, end = gpumem.Event(), gpumem.Event()
    state = {}

    def event_time(fn, index):
        start.record(stream)
        fn(index)
        end.record(stream)
        end.synchronize()
        return start.elapsed_ms(end) / 1e3

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

    def arenas():
        if "arenas" not in state:
            nbytes = bl.arena_bytes(args)
            count = nbytes // 4
            print(f"gpumem: arenas: 3 x {nbytes // MIB} MiB", file=sys.stderr)
            pageable = np.empty(count, np.float32)
            bl.fill_tiled(pageable, data.block)
            pinned = gpumem.pinned_empty(count, "float32")
            pinned[:] = pageable
            dev = gpumem.empty(count)
            gpumem.copy(dev, pinned)
            state["arenas"] = (nbytes, pageable, pinned, dev)
        return state["arenas"]

    def copy_point(figure, size, reps, d2d=False):
        nbytes, pageable, pinned, dev = arenas()
        n = size // 4
        offsets = bl.slots(nbytes, size)
        dviews = [dev[o:o + n] for o in offsets]
        for case in bl.COPY_CASES:
            host = pinned if case.startswith("pinned") else pageable
            hviews = [host[o:o + n] for o in offsets]
            h2d = case.endswith("h2d")

            def once(j):
                t0 = pc()
                if h2d:
                    gpumem.copy(dviews[j], hviews[j])
                else:
                    gpumem.copy(hviews[j], dviews[j])
                gpumem.synchronize()
                return pc() - t0

            once(0)
            one = once(1 % len(offsets))
            count = reps or bl.adaptive_reps(one)
            times = [once(r % len(offsets)) for r in range(count)]
            results.emit(figure, case, "wall", times, size, size,
                         note="gpumem.copy (synchronous) + "
                         "gpumem.synchronize(); " +
                         ("pinned_empty" if case.startswith("pinned")
                          else "NumPy array"))
        if not d2d:
            return
        half = nbytes // 2
        offsets = bl.slots(half, size)
        pairs = [(dev[o:o + n], dev[half // 4 + o:half // 4 + o + n])
                 for o in offsets]

        def copy(j):
            src, dst = pairs[j % len(pairs)]
            gpumem.copy(dst, src, stream=stream)

        event_time(copy, 0)
        one = event_time(copy, 1)
        count = reps or bl.adaptive_reps(one)
        times = [event_time(copy, r) for r in range(count)]
        results.emit(figure, "d2d", "event", times, size, 2 * size,
                     note="gpumem.copy(dst, src, stream=s), events; "
                     "read + write")

    def copy256():
        size = bl.copy256_bytes(args)
        copy_point("copy256", size, 5 if args.quick else 30)
        nbytes, pageable, pinned, dev = arenas()
        n = size // 4
        gpumem.copy(dev[:n], pinned[:n])
        back = np.empty(n, np.float32)
        gpumem.copy(back, dev[:n])
        if not np.array_equal(back, pinned[:n]):
            raise AssertionError("copy256: the data came back changed")

    def sweep():
        for size in bl.sweep_sizes(args.sweep_max):
            copy_point("sweep", size, 3 if args.quick else 0, d2d=True)

    def partitions():
        if "parts" not in state:
            n = data.n
            print(f"gpumem: partitions: 4 x {n * 4 // MIB} MiB",
                  file=sys.stderr)
            parts = []
            for p in range(4):
                part = gpumem.empty(n)
                gpumem.copy(part, data.block)
                for _ in range(p):
                    gpumem.kernels.saxpy(n, 1.0, part, part)   # doubles
                parts.append(part)
            state["parts"] = parts
            state["copy_dst"] = gpumem.empty(n)
        return state["parts"]

    def d2d():
        parts = partitions()
        dst = state["copy_dst"]
        reps = 5 if args.quick else 20

        def copy(i):
            gpumem.copy(dst, parts[i % 4], stream=stream)

        for i in range(3):
            event_time(copy, i)
        times = [event_time(copy, i) for i in range(reps)]
        nbytes = data.n * 4
        results.emit("d2d", "1GiB", "event", times, nbytes, 2 * nbytes,
                     note="gpumem.copy(dst, src, stream=s), 4 sources "
                     "rotated; read + write")

    def algo_bw():
        parts = partitions()
        update_host = bl.random_block(4, seed=3)
        update = gpumem.to_device(update_host)
        partial = gpumem.empty(4)
        reps = 5 if args.quick else 20
        algo = gpumem.kernels.algo
        n = data.n

        def run(i):
            algo(parts[i % 4], update, partial, n, stream=stream)

        for i in range(3):
            event_time(run, i)
        times = [event_time(run, i) for i in range(reps)]
        results.emit("algo_bw", "2^28", "event", times, n * 4, n * 4,
                     note="kernels.algo(..., stream=s), 4 inputs rotated; "
                     "bytes read")
        last = (reps - 1) % 4
        want = (data.means()[last]
                + update_host.astype(np.float64)).astype(np.float32)
        bl.check_close(partial.copy_to_host(), want, 1e-5, "algo_bw")

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
        times = []
        for r in range(-warm, iters):
            if (r + warm) % bl.RESET_EVERY == 0:
                update[:] = bl.INITIAL_UPDATE
            t0 = pc()
            iteration()
            stitching(update, partial)
            if r >= 0:
                times.append(pc() - t0)
        results.emit("graph", case, "wall", times, note=note)
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

    def algo_sweep():
        parts = partitions()
        update_host = bl.random_block(4, seed=3)
        update = gpumem.to_device(update_host)
        partial = gpumem.empty(4)
        dst = state["copy_dst"]
        algo = gpumem.kernels.algo
        reps = 5 if args.quick else 30
        for n in bl.algo_sizes(args.log2n):
            places = [bl.algo_slot(args.log2n, n, j) for j in range(64)]
            views = [parts[p][o:o + n] for p, o in places]
            target = dst[:n]

            def run(j):
                algo(views[j % 64], update, partial, n, stream=stream)

            def copy(j):
                gpumem.copy(target, views[j % 64], stream=stream)

            for case, fn, traffic, note in (
                    ("algo", run, n * 4, "kernels.algo(..., stream=s); "
                     "bytes read"),
                    ("d2d", copy, 2 * n * 4, "gpumem.copy(dst, src, "
                     "stream=s); read + write")):
                for j in range(3):
                    event_time(fn, j)
                times = [event_time(fn, j) for j in range(reps)]
                results.emit("algo_sweep", f"{case}_{n}", "event", times,
                             n * 4, traffic, note=note)

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
        """Pageable copies of 64 KiB to 64 MiB through the staging
        engine (threshold 0, so every size is staged) with chunks sized
        for each copy ("auto") and at several fixed chunk sizes, and
        through plain cudaMemcpy (GPUMEM_COPY_THREADS=0): the
        data for choosing the engine's threshold and chunk.  Each
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
                 else [64 * 1024 << k for k in range(11)])
        configs = [("plain", {"GPUMEM_COPY_THREADS": "0"}),
                   ("auto", {"GPUMEM_COPY_MIN": "0"})] + [
            (f"chunk{c}K", {"GPUMEM_COPY_MIN": "0",
                            "GPUMEM_COPY_CHUNK": str(c * 1024)})
            for c in chunks]
        for name, extra in configs:
            env = dict(os.environ, **extra)
            done = subprocess.run(
                [args.gpumem, "-q", "--backend=" + gpumem.backend, "-c",
                 child, json.dumps(sizes), "0.05"], env=env,
                capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"staging {name}: {done.stderr[-500:]}")
            for d, n, times in json.loads(done.stdout):
                results.emit("staging", f"{name}_{d}_{n}", "wall", times,
                             n, n, note="gpumem.copy, NumPy memory, " +
                             " ".join(f"{k}={v}" for k, v in extra.items()))

    def seed_rate():
        parts = partitions()
        n = min(data.n, 1 << 18)
        update = gpumem.zeros(4)
        partial = gpumem.empty(4)

        def run(i):
            gpumem.kernels.algo_seed(parts[0], update, partial, n,
                                     stream=stream)

        event_time(run, 0)
        times = [event_time(run, i) for i in range(3)]
        results.emit("seed_rate", "2^18", "event", times, n * 4,
                     note=f"one algo_seed call on {n} images")

    return results.run(args, {
        "launch": launch, "alloc": alloc, "copy16": copy16,
        "copy256": copy256, "sweep": sweep, "d2d": d2d, "algo_bw": algo_bw,
        "algo_sweep": algo_sweep, "loop_sweep": loop_sweep,
        "workload": workload, "graph": graph, "seed_rate": seed_rate, "multigpu": multigpu,
        "staging": staging})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
