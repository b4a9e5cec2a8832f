"""The stitching workload spread over the processes of an MPI
job: the same algorithm and result as
scripts/stitching.py, with its 4 partitions on the ranks.

Partition i goes to rank i % size; within a rank, its partitions go
(working at the same time, in a gpumem.concurrent() block) round the
node's devices from the rank's own (its node-local rank modulo
device_count(), so 4 ranks on a 4-GPU node use one GPU each, and 4 ranks
sharing one GPU all use it).  Each iteration, every rank computes its
partitions' partial updates with the native kernel and writes them into
its rows of a (4, 4) DeviceArray, zeros elsewhere; one allreduce(sum)
stitches the rows of all ranks together (adding zeros is exact, so the
result is bit for bit scripts/stitching.py's); then every rank computes

    update[i] = p[i][0] + p[i][1] + p[i][2] - p[i][3]

and copies it to its devices.  Rank 0 prints the report and checks the
result against NumPy.

    mpirun -n 4 gpumem scripts/stitching_mpi.py [--images N]
        [--iterations K] [--kernel algo|algo_seed] [--seed S] [--no-check]
    mpirun -n 4 python scripts/stitching_mpi.py ...   # the module, or
                                                      # the wheel with mpi4py

Outside mpirun it runs as one rank holding all 4 partitions.  Where
gpumem.comm is absent (the wheel under mpirun without mpi4py) it says
why and exits 1.
"""

import argparse
import sys

import numpy as np

import gpumem

# scripts/ leads sys.path: the single-process script supplies the split,
# the stitching and the NumPy reference, so both compute alike.
from stitching import PARTITIONS, IterationClock, check, split, stitching
import stitching as single_process


def parse_args(argv):
    return single_process.parse_args(
        argv, prog="gpumem scripts/stitching_mpi.py",
        description="The iterative 4-partition stitching workload, its "
                    "partitions spread over the ranks of an MPI job.",
        seed_help="seed of the random initial update (every rank draws "
                  "the same)")


def main(argv):
    args = parse_args(argv)
    try:
        comm = gpumem.comm
    except AttributeError as error:
        print(f"{error}; or run scripts/stitching.py", file=sys.stderr)
        return 1
    rank, size = comm.rank, comm.size
    kernel = getattr(gpumem.kernels, args.kernel)
    ndev = gpumem.device_count()
    home = gpumem.current_device().index       # local rank % ndev

    mine = [i for i in range(PARTITIONS) if i % size == rank]
    # The j-th partition of this rank: the node's ranks interleave on
    # its devices, starting from this rank's own.
    devices = {i: (home + comm.local_size * j) % ndev
               for j, i in enumerate(mine)}

    images = np.arange(args.images)                 # each image one value
    parted_images = split(images, PARTITIONS)        # [4][N/4]
    # Every rank draws the same initial update from the same seed; the
    # root's is broadcast anyway, so an unseeded run agrees too.
    update = np.random.default_rng(args.seed).random(4).astype(np.float32)
    seeded = gpumem.to_device(update, device=home)
    comm.bcast(seeded, root=0)
    update = seeded.copy_to_host()
    initial_update = update.copy()

    gpu_update_memory = {d: gpumem.alloc_gpu_memory(4, device=d)
                         for d in sorted(set(devices.values()))}
    gpu_image_memory = {}
    gpu_partial_update_memory = {}
    for i in mine:
        n = len(parted_images[i])
        gpu_image_memory[i] = gpumem.alloc_gpu_memory(n, device=devices[i])
        gpu_partial_update_memory[i] = gpumem.alloc_gpu_memory(
            4, device=devices[i])
    # This rank's rows of the stitched partial updates, zeros elsewhere;
    # the allreduce fills in every other rank's rows.
    zero_rows = gpumem.zeros((PARTITIONS, 4), device=home)
    stitched = gpumem.zeros((PARTITIONS, 4), device=home)
    partial_update = np.empty((PARTITIONS, 4), np.float32)

    for mem in gpu_update_memory.values():
        gpumem.copy_to_gpu(update, mem, 4)          # src, dest, size
    for i in mine:
        gpumem.copy_to_gpu(parted_images[i], gpu_image_memory[i],
                           len(parted_images[i]))

    comm.barrier()
    clock = IterationClock(args.iterations, speak=rank == 0)
    # One block for the whole loop, as in scripts/stitching.py: the calls
    # are queued per device; on NCCL the allreduce is queued too, behind
    # the kernels (on MPI it waits for them and is done on return), and
    # devices_at_once.wait() returns when every device is done and
    # partial_update is filled: one wait an iteration.
    with gpumem.concurrent() as devices_at_once:
        for _ in range(args.iterations):
            clock.start()
            gpumem.copy(stitched, zero_rows)
            for i in mine:
                kernel(gpu_image_memory[i], gpu_update_memory[devices[i]],
                       gpu_partial_update_memory[i], len(parted_images[i]))
                gpumem.copy(stitched[i], gpu_partial_update_memory[i])
            comm.allreduce(stitched, op="sum")
            gpumem.copy_from_gpu(stitched, partial_update, 4 * PARTITIONS)
            devices_at_once.wait()
            stitching(update, partial_update)
            for mem in gpu_update_memory.values():
                gpumem.copy_to_gpu(update, mem, 4)
            clock.stop()

    # Where every partition ran, gathered on rank 0 for the report.
    placement = np.full(PARTITIONS, -1, np.int64)
    for i in mine:
        placement[i] = devices[i]
    placement_all = comm.gather(gpumem.to_device(placement, device=home))
    if placement_all is None:           # every rank but the root
        return 0

    where = placement_all.copy_to_host()
    on = [f"{i % size}:{where[i % size][i]}" for i in range(PARTITIONS)]
    print(f"backend {gpumem.backend}; {size} rank{'s' if size > 1 else ''}"
          f" (collectives on {comm.backend}); partitions on rank:device {on}"
          f" (rank 0's device {home}: {gpumem.Device(home).name})")
    print(clock.summary(args, who=", rank 0"))
    print("update:", update)

    if args.no_check:
        return 0
    return check(update, parted_images, initial_update, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
