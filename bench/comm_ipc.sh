#!/bin/sh
# comm_ipc.sh -- collectives between ranks that share one GPU (bench/NOTES.md,
# "One GPU, several ranks"): gpumem.comm.allreduce of float32 from 4 B to
# 1 GiB (sizes x16 apart, and x2 apart from 512 KiB to 8 MiB, where the
# engines cross) under mpirun with every rank on GPU 0, through
# the shared windows (GPUMEM_COMM=ipc) and through MPI staged in host
# memory (GPUMEM_COMM=mpi, what a job on one GPU had before, and what
# mpi4py with host copies does), with 2 and 4 ranks, each run twice (two
# sets of processes a side); the windows' runs also time one device copy
# of each size (the limit).  Then bench/comm_ipc_report.py prints the
# table.
#
#   bench/comm_ipc.sh [OUTDIR]
#
# OUTDIR (default $BENCH_OUT, else bench/results) receives
# comm-ipc-ENGINE-NRANKS-RUN-PART.jsonl (PART: wide, narrow) and
# comm-ipc.md.  Environment: GPUMEM
# (the program), MPIRUN (default mpirun), BENCH_PYTHON (runs the report;
# default python3), BENCH_TIMEOUT (seconds a run may take; default 300).
# Exit status: 0; 77 where gpumem has no CUDA device; 1 when a run failed.

set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
out=${1:-${BENCH_OUT:-$here/results}}
gpumem=${GPUMEM:-$top/src/gpumem}
mpirun=${MPIRUN:-mpirun}
python=${BENCH_PYTHON:-python3}
limit=${BENCH_TIMEOUT:-300}
mkdir -p "$out" || exit 1
"$gpumem" --backend=cuda -q -c pass 2>/dev/null
if test $? -eq 3; then
  echo "comm_ipc.sh: no CUDA device; nothing measured"
  exit 77
fi
as_root=
test "`id -u`" = 0 && as_root=--allow-run-as-root
status=0
for n in 2 4; do
  for run in 1 2; do
    for engine in ipc mpi; do
      for part in wide narrow; do
        if test $part = wide; then
          sweep="--quick --max-bytes 1073741824"
        else
          sweep="--min-bytes 524288 --max-bytes 8388608"
        fi
        file="$out/comm-ipc-$engine-$n-$run-$part.jsonl"
        echo "+ GPUMEM_COMM=$engine mpirun -n $n gpumem bench/nccl_gpumem.py $sweep (run $run)"
        CUDA_VISIBLE_DEVICES=0 GPUMEM_COMM=$engine timeout "$limit" \
          "$mpirun" $as_root --oversubscribe -n "$n" \
          -x CUDA_VISIBLE_DEVICES -x GPUMEM_COMM \
          "$gpumem" -q "$here/nccl_gpumem.py" --form ranks $sweep \
          --out "$file" || status=1
      done
    done
  done
done
"$python" "$here/comm_ipc_report.py" "$out" | tee "$out/comm-ipc.md" \
  || status=1
exit $status
