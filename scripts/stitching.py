"""The stitching workload, the reference workload gpumem is made for.

Images are split into 4 partitions placed on devices i % device_count().
Each iteration, every partition's device computes a partial update with a
native kernel on memory that Python allocated; the host stitches the 4
partial updates into one update,

    update[i] = p[i][0] + p[i][1] + p[i][2] - p[i][3],

and sends it back to every device.  At the end the result is checked
against the same algorithm run in NumPy, and a short report is printed.

    gpumem scripts/stitching.py [--images N] [--iterations K]
                                [--kernel algo|algo_seed] [--seed S]
                                [--serial | --graph] [--no-check]
                                [--memory device|managed] [--prefetch]
                                [--spill LIMIT]

The partitions' devices work at the same time (gpumem.concurrent());
--serial runs the same loop one call after another, for comparison;
--graph records one iteration's device work once (gpumem.graph(): the
update's copies to the devices, the kernels, the partial updates'
copies back) and replays it every iteration, one graph per device.
--memory managed keeps the images in managed memory (docs/memory.md),
which may exceed the devices' memory; --prefetch then moves each
partition's images to its device before its kernel, every iteration.
--spill LIMIT turns spilling on (gpumem.set_spill) with each device
limited to LIMIT bytes, so that partitions that do not fit together
move to host memory and back; with --prefetch each comes back before
its kernel, moving the idle ones out.

The report names the seed of the random initial update (--seed S runs
the same update again) and the run's elapsed time.  Note that the
workload's stitching roughly doubles the update's magnitude every
iteration, so float32 values overflow after about 100 iterations of
small inputs: a run whose update is no longer finite says so and exits
with status 1 (with --no-check, for timing, it says so and goes on).
"""

import argparse
import random
import sys
import time
from contextlib import nullcontext

import numpy as np

import gpumem

PARTITIONS = 4
# The run's start, for the report's elapsed time.
STARTED = time.perf_counter()


def parse_args(argv, prog="gpumem scripts/stitching.py",
               description="The iterative 4-partition stitching workload.",
               seed_help="seed of the random initial update",
               graph_option=False, memory_option=False):
    """The workload's command line (shared with stitching_mpi.py)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--images", type=int, default=40,
                        help="number of images in all (default 40)")
    parser.add_argument("--iterations", type=int, default=10,
                        help="iterations (default 10)")
    parser.add_argument("--kernel", choices=["algo", "algo_seed"],
                        default="algo",
                        help="the partial-update kernel (default algo)")
    parser.add_argument("--seed", type=int, default=None, help=seed_help)
    parser.add_argument("--no-check", action="store_true",
                        help="skip the NumPy check (for timing huge runs)")
    parser.add_argument("--serial", action="store_true",
                        help="one call after another, each complete before "
                             "the next (no gpumem.concurrent block)")
    if graph_option:
        parser.add_argument("--graph", action="store_true",
                            help="capture one iteration's device work "
                                 "once and replay it (gpumem.graph)")
    if memory_option:
        parser.add_argument("--memory", choices=["device", "managed"],
                            default="device",
                            help="the images' memory (default device)")
        parser.add_argument("--prefetch", action="store_true",
                            help="prefetch each partition's images to its "
                                 "device before its kernel (managed, or "
                                 "spilled with --spill)")
        parser.add_argument("--spill", metavar="LIMIT", default=None,
                            help="spilling on, each device limited to "
                                 "LIMIT bytes ('8GiB'), so that the "
                                 "images may exceed it (gpumem.set_spill)")
    args = parser.parse_args(argv)
    if getattr(args, "graph", False) and args.serial:
        parser.error("--graph and --serial exclude each other")
    if getattr(args, "prefetch", False) and (
            (args.memory != "managed" and args.spill is None)
            or getattr(args, "graph", False)):
        parser.error("--prefetch needs --memory managed or --spill, and no "
                     "--graph (a recording refuses prefetches)")
    if getattr(args, "spill", None) is not None and args.memory != "device":
        parser.error("--spill needs --memory device")
    if args.images < PARTITIONS:
        parser.error(f"--images must be at least {PARTITIONS}")
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    return args


class IterationClock:
    """Times the loop's iterations (time.perf_counter) and, where SPEAK,
    prints one about once a second so that a long run shows progress."""

    def __init__(self, iterations, speak=True):
        self.iterations = iterations
        self.speak = speak
        self.times = []
        self.started = 0.0
        self.last_report = time.perf_counter()

    def start(self):
        self.started = time.perf_counter()

    def stop(self):
        now = time.perf_counter()
        self.times.append(now - self.started)
        if self.speak and now - self.last_report > 1.0:
            print(f"iteration {len(self.times)}/{self.iterations}: "
                  f"{self.times[-1] * 1e6:.1f} us", flush=True)
            self.last_report = now

    def summary(self, args, who=""):
        """The report's line on the run's speed (WHO: whose clock): the
        median iteration, the loop's time and the whole run's, start-up
        and allocations included."""
        return (f"{args.images} images, {args.iterations} iterations, kernel "
                f"{args.kernel}: {np.median(self.times) * 1e6:.1f} us per "
                f"iteration (median{who}); the loop "
                f"{sum(self.times) * 1e3:.3f} ms, the run "
                f"{time.perf_counter() - STARTED:.3f} s elapsed")


def pick_seed(args):
    """The seed of the run: --seed's, else a random one, which the
    report prints so that the run can be repeated."""
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**32)
    return args.seed


def split(images, parts):
    """The workload's split: PARTS nearly equal consecutive pieces."""
    return np.array_split(images, parts)


def stitching(update, partial_update):
    """update[i] = p[i][0] + p[i][1] + p[i][2] - p[i][3], in place."""
    p = partial_update
    # Long runs overflow float32 by design of the formula; the check
    # reports that instead of NumPy warning about it.
    with np.errstate(over="ignore", invalid="ignore"):
        update[:] = p[:, 0] + p[:, 1] + p[:, 2] - p[:, 3]


def reference(parted_images, update, iterations, kernel):
    """The same algorithm in NumPy: the check for the devices' result."""
    update = update.copy()
    partial_update = np.empty((PARTITIONS, 4), np.float32)
    if kernel == "algo":
        # The kernel adds the mean and the update in double and rounds
        # once to float.
        stat = [part.astype(np.float64).mean() for part in parted_images]
    else:
        # The stitching workload leaves the last image's value (in float).
        stat = [np.float32(part[-1]) for part in parted_images]
    for _ in range(iterations):
        for i in range(PARTITIONS):
            partial_update[i] = (stat[i] + update.astype(stat[i].dtype)
                                 ).astype(np.float32)
        stitching(update, partial_update)
    return update


def iteration_graph(kernel, devices, parted_images, gpu_image_memory,
                    gpu_update_memory, gpu_partial_update_memory, update,
                    partial_update):
    """One iteration's device work recorded once: the update's copies
    to every device, the kernels, the partial updates' copies back into
    PARTIAL_UPDATE.  Each replay reads UPDATE as it is then."""
    with gpumem.graph(name="stitching iteration") as iteration:
        for mem in gpu_update_memory.values():
            gpumem.copy_to_gpu(update, mem, 4)
        for i in range(PARTITIONS):
            kernel(gpu_image_memory[i], gpu_update_memory[devices[i]],
                   gpu_partial_update_memory[i], len(parted_images[i]))
            gpumem.copy_from_gpu(gpu_partial_update_memory[i],
                                 partial_update[i], 4)
    return iteration


def main(argv):
    args = parse_args(argv, graph_option=True, memory_option=True)
    rng = np.random.default_rng(pick_seed(args))
    kernel = getattr(gpumem.kernels, args.kernel)
    ndev = gpumem.device_count()
    devices = [i % ndev for i in range(PARTITIONS)]

    images = np.arange(args.images)                 # each image one value
    parted_images = split(images, PARTITIONS)        # [4][N/4]
    update = rng.random(4).astype(np.float32)        # 4 values
    initial_update = update.copy()
    partial_update = np.empty((PARTITIONS, 4), np.float32)

    if args.spill is not None:
        gpumem.set_spill(True)
        for d in sorted(set(devices)):
            gpumem.set_memory_limit(args.spill, device=d)

    # One copy of the update on every device that runs the kernel.
    gpu_update_memory = {d: gpumem.alloc_gpu_memory(4, device=d)
                         for d in sorted(set(devices))}
    gpu_image_memory = []
    gpu_partial_update_memory = []
    for i in range(PARTITIONS):
        n = len(parted_images[i])
        gpu_image_memory.append(
            gpumem.alloc_gpu_memory(n, device=devices[i],
                                    memory=args.memory))
        gpu_partial_update_memory.append(
            gpumem.alloc_gpu_memory(4, device=devices[i]))

    for mem in gpu_update_memory.values():
        gpumem.copy_to_gpu(update, mem, 4)          # src, dest, size
    for i in range(PARTITIONS):
        gpumem.copy_to_gpu(parted_images[i], gpu_image_memory[i],
                           len(parted_images[i]))

    clock = IterationClock(args.iterations)
    if args.graph:
        # The same iteration, its device work replayed: the update goes
        # to the devices at the start of each replay instead of the end
        # of the iteration before, the same bytes in the same order.
        iteration = iteration_graph(kernel, devices, parted_images,
                                    gpu_image_memory, gpu_update_memory,
                                    gpu_partial_update_memory, update,
                                    partial_update)
        for _ in range(args.iterations):
            clock.start()
            iteration()
            stitching(update, partial_update)
            clock.stop()
        del iteration
        return report(update, parted_images, initial_update, devices, clock,
                      args, "graph")

    # The stitching workload.  Inside gpumem.concurrent() the calls are
    # queued per device instead of waited for one by one, so the devices
    # work at the same time; devices_at_once.wait() returns when every
    # device is done and partial_update is filled.  The update's copies
    # are queued too and run before the next iteration's kernels.
    devices_at_once = None if args.serial else gpumem.concurrent()
    with devices_at_once or nullcontext():
        for _ in range(args.iterations):
            clock.start()
            for i in range(PARTITIONS):
                if args.prefetch:
                    gpu_image_memory[i].prefetch(devices[i])
                kernel(gpu_image_memory[i], gpu_update_memory[devices[i]],
                       gpu_partial_update_memory[i], len(parted_images[i]))
                gpumem.copy_from_gpu(gpu_partial_update_memory[i],
                                     partial_update[i], 4)
            if devices_at_once is not None:
                devices_at_once.wait()
            stitching(update, partial_update)
            for mem in gpu_update_memory.values():
                gpumem.copy_to_gpu(update, mem, 4)
            clock.stop()

    return report(update, parted_images, initial_update, devices, clock,
                  args, "serial" if args.serial else "concurrent")


def report(update, parted_images, initial_update, devices, clock, args,
           how):
    """Prints the run's report (HOW: serial, concurrent or graph) and
    the check's verdict; returns the exit status."""
    names = sorted({f"{d}: {gpumem.Device(d).name}" for d in devices})
    memory = getattr(args, "memory", "device")
    if memory != "device" or getattr(args, "spill", None) is not None:
        how += (f", {memory} images"
                + (f", spilling past {args.spill}"
                   if getattr(args, "spill", None) is not None else "")
                + (", prefetched" if getattr(args, "prefetch", False)
                   else ""))
    print(f"backend {gpumem.backend}; partitions on devices {devices} "
          f"({'; '.join(names)}); {how}; seed {args.seed}")
    print(clock.summary(args))
    print("update:", update)

    if args.no_check:
        # Timing runs (make bench) go on past the overflow: say so only.
        finite(update, args)
        return 0
    return check(update, parted_images, initial_update, args)


def finite(update, args):
    """Whether every value of UPDATE is finite; else says why on stderr
    (shared with stitching_mpi.py)."""
    if np.all(np.isfinite(update)):
        return True
    print(f"stitching: the update is no longer finite after "
          f"{args.iterations} iterations ({update}): the stitching roughly "
          "doubles it every iteration, so float32 overflows after about "
          "100 iterations of small inputs; run fewer (--iterations)"
          + (" (not an error with --no-check)" if args.no_check else ""),
          file=sys.stderr)
    return False


def check(update, parted_images, initial_update, args):
    """Compares UPDATE with the NumPy run of the same algorithm; prints
    the verdict and returns the exit status (shared with
    stitching_mpi.py)."""
    if not finite(update, args):
        return 1
    expect = reference(parted_images, initial_update, args.iterations,
                       args.kernel)
    if not np.all(np.isfinite(expect)):
        print("check: the values overflowed float32 in the NumPy run too "
              "(the stitching doubles them each iteration); use fewer "
              "iterations to compare")
        return 0
    scale = max(float(np.max(np.abs(expect))), 1.0)
    error = float(np.max(np.abs(update.astype(np.float64) - expect))) / scale
    if not error <= 1e-4:
        print(f"check: FAILED: relative error {error:.3g} against NumPy",
              file=sys.stderr)
        print("expected:", expect, file=sys.stderr)
        return 1
    print(f"check: matches NumPy (relative error {error:.2g})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
