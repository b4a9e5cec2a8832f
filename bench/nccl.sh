#!/bin/sh
# nccl.sh -- the collectives benchmark (bench/NOTES.md, "Collectives"):
# in-place allreduce (sum) of float32 from 4 B to 1 GiB on 2 or more
# GPUs, raw NCCL (bench/nccl_raw.c, one process driving every GPU and
# one MPI rank a GPU) against gpumem (gpumem.comm.allreduce under mpirun
# on NCCL and on the MPI staged path, gpumem.allreduce_devices in one
# process), bus bandwidth as nccl-tests defines it; then the distributed
# workload (scripts/stitching_mpi.py) on each engine; then the report
# (bench/nccl_report.py).  bench/run.sh (make bench) calls it; make
# bench-nccl runs it alone.
#
#   bench/nccl.sh [OUTDIR]
#
# OUTDIR (default $BENCH_OUT, else bench/results) receives, with no
# subfolders: nccl-machine.txt, nccl-raw-devices.jsonl, nccl-raw-ranks.jsonl,
# nccl-gpumem-nccl.jsonl, nccl-gpumem-mpi.jsonl,
# nccl-gpumem-devices.jsonl, nccl-stitching.jsonl, a .log for each step,
# DATE-TAG-nccl.md and DATE-TAG-nccl-busbw.png.
#
# Environment: GPUMEM (the program), CC, CUDA_CFLAGS, CUDA_LIBS,
# NCCL_CFLAGS, NCCL_LIBS, MPI_CFLAGS, MPI_LIBS, MPIRUN (make passes what
# configure found; NCCL defaults to /usr/local/cuda), BENCH_BUILD,
# BENCH_ARGS (--quick: sizes x16 apart), BENCH_TIMEOUT (seconds a step
# may take; default 300), BENCH_NCCL_GPUS (how many GPUs; default all),
# BENCH_NCCL_STITCH=0 (leave the workload out), BENCH_PYTHON (runs the
# report; matplotlib for its plot), BENCH_COMMIT (the commit the report
# names, for a tree without .git; see commit.sh).  NVLink multicast stays off
# (NCCL_NVLS_ENABLE=0 unless set otherwise).
#
# Exit status: 0; 77 with fewer than 2 GPUs (nothing measured); 1 when a
# step failed (the report is still written from what ran).

set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$here/commit.sh"
out=${1:-${BENCH_OUT:-$here/results}}
gpumem=${GPUMEM:-$top/src/gpumem}
build=${BENCH_BUILD:-$here/build}
args=${BENCH_ARGS:-}
limit=${BENCH_TIMEOUT:-300}
cc=${CC:-cc}
cuda_cflags=${CUDA_CFLAGS:--I/usr/local/cuda/include}
cuda_libs=${CUDA_LIBS:--L/usr/local/cuda/lib64 -lcudart}
nccl_cflags=${NCCL_CFLAGS:--I/usr/local/cuda/include}
nccl_libs=${NCCL_LIBS:--L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lnccl}
mpi_cflags=${MPI_CFLAGS:-}
mpi_libs=${MPI_LIBS:-}
mpirun=${MPIRUN:-}
python=${BENCH_PYTHON:-}
if test -z "$python"; then
  if test -x /opt/torch/.venv/bin/python3; then
    python=/opt/torch/.venv/bin/python3
  else
    python=python3
  fi
fi
NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export NCCL_NVLS_ENABLE

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if test "${gpus:-0}" -lt 2; then
  echo "bench/nccl.sh: fewer than 2 GPUs here (${gpus:-0}): the collectives" \
       "benchmark needs 2 or more" >&2
  exit 77
fi
if test -n "${BENCH_NCCL_GPUS:-}" && test "$BENCH_NCCL_GPUS" -lt "$gpus"; then
  gpus=$BENCH_NCCL_GPUS
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((gpus - 1)))
  export CUDA_VISIBLE_DEVICES
fi
mkdir -p "$out" "$build" || exit 1
out=$(cd "$out" && pwd)
status=0
begin=$(date +%s)
as_root=
test "$(id -u)" = 0 && as_root=--allow-run-as-root

step () {
  echo "bench/nccl.sh: $* ($(( $(date +%s) - begin )) s)"
}

# What ran where: the GPUs, how they are connected, the program.
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total \
    --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  echo "GPUs used: $gpus; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  echo "gpumem: $("$gpumem" --version 2>/dev/null | head -n 1), commit $(bench_commit "$top")"
  echo "mpirun: ${mpirun:-none} $("${mpirun:-false}" --version 2>/dev/null | head -n 1)"
  echo "started: $(date -u '+%F %T UTC')"
  echo "topology (nvidia-smi topo -m):"
  nvidia-smi topo -m 2>/dev/null
} > "$out/nccl-machine.txt"

# run NAME COMMAND...: one step, its progress to nccl-NAME.log; 77 is a
# skip.
run () {
  name=$1
  shift
  step "running $name"
  timeout "$limit" "$@" > "$out/nccl-$name.log" 2>&1
  rc=$?
  tail -n 3 "$out/nccl-$name.log"
  case $rc in
    0) ;;
    77) echo "bench/nccl.sh: $name skipped (see nccl-$name.log)" >&2 ;;
    124) echo "bench/nccl.sh: $name ran past ${limit} s and was stopped" >&2
         status=1 ;;
    *) echo "bench/nccl.sh: $name FAILED (exit $rc; see nccl-$name.log)" >&2
       status=1 ;;
  esac
}

step "building nccl_raw on $gpus GPUs"
# The flags may hold several words each.
# shellcheck disable=SC2086
if ! $cc -std=c11 -O2 -Wall $cuda_cflags $nccl_cflags -o "$build/nccl_raw" \
     "$here/nccl_raw.c" $nccl_libs $cuda_libs > "$out/nccl-build.log" 2>&1; then
  cat "$out/nccl-build.log" >&2
  status=1
fi
if test -n "$mpirun"; then
  # shellcheck disable=SC2086
  if ! $cc -std=c11 -O2 -Wall -DGM_BENCH_MPI $cuda_cflags $nccl_cflags \
       $mpi_cflags -o "$build/nccl_raw_mpi" "$here/nccl_raw.c" $nccl_libs \
       $cuda_libs $mpi_libs >> "$out/nccl-build.log" 2>&1; then
    cat "$out/nccl-build.log" >&2
    status=1
  fi
fi

# shellcheck disable=SC2086
test -x "$build/nccl_raw" && run raw-devices "$build/nccl_raw" \
  --gpus "$gpus" --out "$out/nccl-raw-devices.jsonl" $args
# shellcheck disable=SC2086
run gpumem-devices "$gpumem" -q --backend=cuda "$here/nccl_gpumem.py" \
  --form devices --out "$out/nccl-gpumem-devices.jsonl" $args
if test -n "$mpirun"; then
  # shellcheck disable=SC2086
  test -x "$build/nccl_raw_mpi" && run raw-ranks "$mpirun" $as_root \
    -n "$gpus" -x NCCL_NVLS_ENABLE "$build/nccl_raw_mpi" \
    --out "$out/nccl-raw-ranks.jsonl" $args
  for engine in nccl mpi; do
    # shellcheck disable=SC2086
    GPUMEM_COMM=$engine run gpumem-$engine "$mpirun" $as_root -n "$gpus" \
      -x GPUMEM_COMM -x NCCL_NVLS_ENABLE "$gpumem" -q --backend=cuda \
      "$here/nccl_gpumem.py" --form ranks \
      --out "$out/nccl-gpumem-$engine.jsonl" $args
  done
  if test "${BENCH_NCCL_STITCH:-1}" != 0; then
    : > "$out/nccl-stitching.jsonl"
    for images in 40 1073741824; do
      iterations=2000
      test "$images" -gt 40 && iterations=100
      for engine in nccl mpi; do
        name=stitching-$engine-$images
        GPUMEM_COMM=$engine run "$name" "$mpirun" $as_root -n "$gpus" \
          -x GPUMEM_COMM -x NCCL_NVLS_ENABLE "$gpumem" -q --backend=cuda \
          "$top/scripts/stitching_mpi.py" --images "$images" \
          --iterations "$iterations" --kernel algo --seed 1 --no-check
        us=$(sed -n 's/.*: \([0-9.]*\) us per iteration.*/\1/p' \
             "$out/nccl-$name.log" | head -n 1)
        test -n "$us" && echo "{\"impl\": \"stitching\", \"engine\":" \
          "\"$engine\", \"n\": $gpus, \"images\": $images, \"iterations\":" \
          "$iterations, \"us_per_iteration\": $us}" \
          >> "$out/nccl-stitching.jsonl"
      done
    done
  fi
else
  echo "bench/nccl.sh: no mpirun (configure found no MPI): the ranks' runs" \
       "are left out" >&2
fi

step "writing the report"
if ! "$python" "$here/nccl_report.py" "$out" --date "$(date +%F)"; then
  echo "bench/nccl.sh: nccl_report.py FAILED" >&2
  status=1
fi
step "done: $out"
exit $status
