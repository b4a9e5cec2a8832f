"""gpumem's side of bench/nccl.sh: in-place allreduce (sum) of float32
from 4 B to 1 GiB, timed as bench/nccl_raw.c times the raw NCCL
baseline, with bus bandwidth as nccl-tests defines it
(busbw = algbw * 2 (n - 1) / n).

    mpirun -n N gpumem bench/nccl_gpumem.py --form ranks --out FILE
    gpumem bench/nccl_gpumem.py --form devices --out FILE

ranks: gpumem.comm.allreduce, a DeviceArray on each rank's own device,
the engine as GPUMEM_COMM chooses (the record's "impl" says which:
gpumem-nccl, gpumem-ipc or gpumem-mpi; with gpumem-ipc, ranks sharing
one GPU, rank 0 also times one device copy of each size,
"device-copy").  devices: gpumem.allreduce_devices over
every device of this one process.  Modes: sync, each call complete when
it returns (no stream=: gpumem's ordinary call); async, ITERS calls with
stream= queued back to back and one synchronize (NCCL only, ranks form),
the way nccl-tests times.  Rank 0 writes one JSON record a line.  Exit
77 where there are fewer than 2 ranks or devices.
"""

import argparse
import json
import sys
import time

import numpy as np

import gpumem


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="gpumem bench/nccl_gpumem.py")
    parser.add_argument("--form", choices=["ranks", "devices"],
                        required=True)
    parser.add_argument("--min-bytes", type=int, default=4)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--quick", action="store_true",
                        help="sizes x16 apart instead of x2")
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


def copy_reference(count, rank, barrier, out):
    """Where ranks share one GPU (impl gpumem-ipc), the time rank 0 takes
    for one device-to-device copy of the same bytes while the others wait:
    the data's least traffic on that GPU, the limit of the windows'
    engine (its allreduce moves each byte a few times)."""
    barrier()
    if rank == 0:
        src, dst = gpumem.zeros(count, "float32"), gpumem.empty(count)
        gpumem.copy(dst, src)
        times = []
        for _ in range(7):
            iters = 20
            start = time.perf_counter()
            for _ in range(iters):
                gpumem.copy(dst, src)
            times.append((time.perf_counter() - start) / iters)
        t = sorted(times)[len(times) // 2]
        out.write(json.dumps({
            "impl": "device-copy", "form": "ranks", "n": 1,
            "bytes": count * 4, "mode": "sync", "time_us": t * 1e6,
            "algbw_GBs": count * 4 / t / 1e9, "busbw_GBs": 0.0,
            "iters": iters * 7}) + "\n")
        out.flush()
    barrier()


def main(argv):
    args = parse_args(argv)
    comm = getattr(gpumem, "comm", None)
    if args.form == "ranks":
        if comm is None or comm.size < 2:
            print("needs gpumem.comm and 2 or more ranks (mpirun -n 2)",
                  file=sys.stderr)
            return 77
        n, rank = comm.size, comm.rank
        impl = f"gpumem-{comm.backend}"
        buffer = gpumem.zeros(args.max_bytes // 4)
        barrier = comm.barrier
        views = {}

        def call(count, stream=None):
            # The view is made once a size, outside the timed calls.
            view = views.get(count)
            if view is None:
                views.clear()
                view = views[count] = buffer[:count]
            if stream is None:
                comm.allreduce(view)
            else:
                comm.allreduce(view, stream=stream)

        def slowest(seconds):
            t = gpumem.to_device(np.array([seconds]))
            comm.allreduce(t, op="max")
            return float(t.copy_to_host()[0])
    else:
        n, rank = gpumem.device_count(), 0
        if n < 2:
            print("needs 2 or more devices", file=sys.stderr)
            return 77
        impl = "gpumem-devices"
        buffers = [gpumem.zeros(args.max_bytes // 4, device=d)
                   for d in range(n)]
        views = {}

        def barrier():
            pass

        def call(count, stream=None):
            group = views.get(count)
            if group is None:
                views.clear()
                group = views[count] = [b[:count] for b in buffers]
            gpumem.allreduce_devices(group)

        def slowest(seconds):
            return seconds
    stream = gpumem.Stream() if args.form == "ranks" \
        and impl == "gpumem-nccl" else None

    def timed(count, iters, queued):
        barrier()
        start = time.perf_counter()
        for _ in range(iters):
            call(count, stream if queued else None)
        if queued:
            stream.synchronize()
        return slowest(time.perf_counter() - start) / iters

    out = open(args.out, "w") if rank == 0 else None
    nbytes = max(4, args.min_bytes // 4 * 4)
    while nbytes <= args.max_bytes:
        count = nbytes // 4
        call(count)                               # warm up
        estimate = timed(count, 3, False)
        iters = max(3, min(2000, int(0.2 / estimate) if estimate else 2000))
        modes = [("sync", False)]
        if stream is not None:
            modes.append(("async", True))
        for mode, queued in modes:
            t = timed(count, iters, queued)
            algbw = nbytes / t / 1e9
            if out is not None:
                out.write(json.dumps({
                    "impl": impl, "form": args.form, "n": n,
                    "bytes": nbytes, "mode": mode, "time_us": t * 1e6,
                    "algbw_GBs": algbw,
                    "busbw_GBs": algbw * 2 * (n - 1) / n,
                    "iters": iters}) + "\n")
                out.flush()
        if impl == "gpumem-ipc":
            copy_reference(count, rank, barrier, out)
        nbytes *= 16 if args.quick else 2
    if out is not None:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
