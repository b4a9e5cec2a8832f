"""algo's read bandwidth against the device-to-device copy bandwidth, on
one device, measured with events (warm-up,
repetitions, medians, several input buffers larger than L2).

    gpumem bench/probes/algo_bandwidth.py [--log2n 28] [--reps 20]
"""

import argparse
import statistics
import sys

import numpy as np

import gpumem


def timed(fn, reps, stream):
    start, end = gpumem.Event(), gpumem.Event()
    times = []
    for i in range(reps):
        start.record(stream)
        fn(i)
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_ms(end) / 1e3)
    return statistics.median(times)


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2n", type=int, default=28)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    n = 1 << args.log2n
    nbytes = 4 * n
    rng = np.random.default_rng(1)
    stream = gpumem.Stream()
    # Two input sets of 1 GiB each: together far beyond the 60 MB L2.
    inputs = [gpumem.to_device(rng.random(n, dtype=np.float32))
              for _ in range(2)]
    copy_dst = gpumem.empty(n)
    update = gpumem.to_device(rng.random(4, dtype=np.float32))
    out = gpumem.empty(4)

    def copy(i):
        gpumem.copy(copy_dst, inputs[i % 2], stream=stream)

    def algo(i):
        gpumem.kernels.algo(inputs[i % 2], update, out, n, stream=stream)

    for fn in (copy, algo):
        for i in range(3):
            fn(i)
    stream.synchronize()
    t_copy = timed(copy, args.reps, stream)
    t_algo = timed(algo, args.reps, stream)
    copy_bw = 2 * nbytes / t_copy / 1e9         # bytes read + written
    algo_bw = nbytes / t_algo / 1e9             # bytes read
    dev = gpumem.Device(0)
    print(f"device: {dev.name}; n = 2^{args.log2n} float32 "
          f"({nbytes / 2**30:.2f} GiB); medians of {args.reps}")
    print(f"device-to-device copy: {t_copy * 1e3:.3f} ms, "
          f"{copy_bw:.0f} GB/s (read + write)")
    print(f"algo:                  {t_algo * 1e3:.3f} ms, "
          f"{algo_bw:.0f} GB/s (read)")
    print(f"algo / copy bandwidth: {algo_bw / copy_bw:.3f}")
    want = (inputs[1].copy_to_host().astype(np.float64).mean()
            + update.copy_to_host().astype(np.float64)).astype(np.float32)
    gpumem.kernels.algo(inputs[1], update, out, n)
    got = out.copy_to_host()
    if not np.allclose(got, want, rtol=1e-6):
        print("algo result WRONG:", got, want)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
