"""Device-to-device copies between every pair of devices: correctness and
bandwidth (event-timed on the destination device, median of REPS after
warm-ups), and whether peer access was possible.

    gpumem bench/probes/peer_copy.py [--mib 256] [--reps 10]
"""

import argparse
import statistics
import sys

import numpy as np

import gpumem


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args(argv)
    n = args.mib << 20
    ndev = gpumem.device_count()
    rng = np.random.default_rng(1)
    host = rng.integers(1, 255, n, dtype=np.uint8)
    arrays = [gpumem.to_device(host, device=d) for d in range(ndev)]
    print(f"{ndev} devices; {args.mib} MiB copies; GB/s (bytes moved / "
          f"time), median of {args.reps}")
    failed = 0
    for src in range(ndev):
        for dst in range(ndev):
            if src == dst:
                continue
            target = gpumem.zeros(n, "uint8", device=dst)
            stream = gpumem.Stream(device=dst)
            start, end = gpumem.Event(device=dst), gpumem.Event(device=dst)
            for _ in range(2):
                gpumem.copy(target, arrays[src], stream=stream)
            stream.synchronize()
            times = []
            for _ in range(args.reps):
                start.record(stream)
                gpumem.copy(target, arrays[src], stream=stream)
                end.record(stream)
                end.synchronize()
                times.append(start.elapsed_ms(end) / 1e3)
            ok = np.array_equal(target.copy_to_host(), host)
            failed += not ok
            print(f"  {src} -> {dst}: {n / statistics.median(times) / 1e9:7.1f}"
                  f" GB/s  {'exact' if ok else 'WRONG'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
