#!/bin/sh
# run.sh -- the benchmark suite (bench/NOTES.md): builds raw.cu, runs raw
# CUDA C, gpumem and CuPy one after another on device 0, and writes the
# report.  make bench runs it.
#
#   bench/run.sh [OUTDIR]
#
# OUTDIR (default $BENCH_OUT, else bench/results) receives, with no
# subfolders: DATE-TAG.md (DATE from date +%F, TAG the GPU model, e.g.
# 2026-11-29-h200.md), DATE-TAG-sweep-CASE.png, raw.jsonl, gpumem.jsonl,
# cupy.jsonl, machine.txt and a .log for each step.
#
# Environment: GPUMEM (the program; default src/gpumem of this tree),
# NVCC and NVCC_ARCH (default nvcc from PATH or /usr/local/cuda, sm_90),
# BENCH_PYTHON (a Python with CuPy, NumPy and matplotlib; default
# /opt/torch/.venv/bin/python3 where it exists, else python3),
# BENCH_BUILD (where raw is built; default bench/build), BENCH_ARGS
# (arguments for all three implementations, e.g. --quick), BENCH_TIMEOUT
# (seconds each implementation may take; default 150), BENCH_BACKEND
# (gpumem's --backend; default cuda, host only to test this script).
#
# Exit status: 0; 77 when no GPU answers (nothing is measured); 1 when a
# step failed (the report is still written from what ran).

set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
out=${1:-${BENCH_OUT:-$here/results}}
gpumem=${GPUMEM:-$top/src/gpumem}
build=${BENCH_BUILD:-$here/build}
args=${BENCH_ARGS:-}
limit=${BENCH_TIMEOUT:-150}
arch=${NVCC_ARCH:--gencode=arch=compute_90,code=sm_90}
nvcc=${NVCC:-}
if test -z "$nvcc"; then
  if command -v nvcc >/dev/null 2>&1; then
    nvcc=nvcc
  else
    nvcc=/usr/local/cuda/bin/nvcc
  fi
fi
python=${BENCH_PYTHON:-}
if test -z "$python"; then
  if test -x /opt/torch/.venv/bin/python3; then
    python=/opt/torch/.venv/bin/python3
  else
    python=python3
  fi
fi

if ! command -v nvidia-smi >/dev/null 2>&1 \
   || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "bench: no GPU here (nvidia-smi lists none): nothing to measure;" \
       "run make bench on a machine with an NVIDIA GPU" >&2
  exit 77
fi

mkdir -p "$out" "$build" || exit 1
out=$(cd "$out" && pwd)
status=0
begin=$(date +%s)

step () {
  echo "bench: $* ($(( $(date +%s) - begin )) s)"
}

# What ran where.
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,pcie.link.gen.max,pcie.link.width.max \
    --format=csv,noheader 2>/dev/null \
    | sed 's/^/gpu (name, driver, memory, max SM clock, max memory clock, PCIe gen, width): /'
  echo "CUDA version (driver, nvidia-smi): $(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
  echo "nvcc: $("$nvcc" --version 2>/dev/null | grep -i release | head -n 1)"
  echo "host: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM (MemTotal)"
  echo "gpumem: $("$gpumem" --version 2>/dev/null | head -n 1), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')$(test -n "$(git -C "$top" status --porcelain --untracked-files=no 2>/dev/null)" && echo ' (with uncommitted changes)')"
  echo "Python for CuPy and the report: $python ($("$python" --version 2>&1))"
  echo "started: $(date -u '+%F %T UTC')"
} > "$out/machine.txt"
cat "$out/machine.txt"

step "building raw.cu"
# NVCC and NVCC_ARCH may hold several words (make passes two -gencode).
# shellcheck disable=SC2086
if ! $nvcc -std=c++17 -O3 $arch -I"$top/kernels" -Xcompiler -Wall \
     -o "$build/raw" "$here/raw.cu" "$top/kernels/algo_seed.cu" \
     "$top/kernels/algo.cu" "$top/kernels/saxpy.cu" > "$out/build.log" 2>&1; then
  cat "$out/build.log" >&2
  echo "bench: building raw.cu FAILED" >&2
  status=1
fi

# run NAME COMMAND...: runs one implementation, its records to NAME.jsonl
# and its progress to NAME.log; 77 (not available) is a skip.
run () {
  name=$1
  shift
  rm -f "$out/$name.jsonl"
  step "running $name"
  timeout "$limit" "$@" --out "$out/$name.jsonl" > "$out/$name.log" 2>&1
  rc=$?
  tail -n 3 "$out/$name.log"
  case $rc in
    0) ;;
    77) echo "bench: $name skipped (not available here; see $name.log)" >&2 ;;
    124) echo "bench: $name ran past ${limit} s and was stopped" >&2
         status=1 ;;
    *) echo "bench: $name FAILED (exit status $rc; see $out/$name.log)" >&2
       status=1 ;;
  esac
}

if test -x "$build/raw"; then
  # shellcheck disable=SC2086
  run raw "$build/raw" $args
fi
# shellcheck disable=SC2086
run gpumem "$gpumem" -q --backend="${BENCH_BACKEND:-cuda}" "$here/bench_gpumem.py" $args
# shellcheck disable=SC2086
run cupy "$python" "$here/bench_cupy.py" $args

# Collectives where 2 or more GPUs answer (bench/nccl.sh: its own
# records and report in the same folder; 77, fewer GPUs, is a skip).
step "running the collectives benchmark (bench/nccl.sh)"
BENCH_PYTHON=$python sh "$here/nccl.sh" "$out"
case $? in 0|77) ;; *) status=1 ;; esac

step "writing the report"
if ! "$python" "$here/report.py" "$out" --date "$(date +%F)"; then
  echo "bench: report.py FAILED" >&2
  status=1
fi
step "done: $out"
exit $status
