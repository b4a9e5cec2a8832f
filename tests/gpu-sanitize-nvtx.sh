#!/bin/sh
# gpu-sanitize-nvtx.sh OUTDIR -- compute-sanitizer's memcheck sees the
# arrays gpumem registers with the NVTX memory API (GPUMEM_NVTX=1).
#
# Runs tests/fuzz/sanitize_past_end.py, a kernel writing one float past a
# DeviceArray of 1000 floats made where the pool had held a larger block,
# under memcheck twice:
#   nvtx-on   GPUMEM_NVTX=1: memcheck must report an "Invalid __global__
#             write" (the test fails otherwise);
#   nvtx-off  GPUMEM_NVTX=0: reported as seen, not judged: whether memcheck
#             catches it without the registration depends on how it sees
#             the stream-ordered pool's blocks.
# Logs: OUTDIR/memcheck-nvtx-on.log, OUTDIR/memcheck-nvtx-off.log; a line
# each in OUTDIR/summary-nvtx.log.  Exits 0 when the nvtx-on run reports
# the write, 1 when not (or when a run never reaches its kernel: the
# script needs gpumem.jit, so NVRTC), 2 for a usage error, 77 without a
# CUDA device.  Run from the build folder after make (tests/gpu-
# sanitize.sh calls it); GPUMEM_BUILD, GM_SRCDIR and COMPUTE_SANITIZER as
# there.
set -u

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
build=${GPUMEM_BUILD:-$(pwd)}
src=${GM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
gpumem=$build/src/gpumem
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer \
  || echo /usr/local/cuda/bin/compute-sanitizer)}
script=$src/tests/fuzz/sanitize_past_end.py
summary=$out/summary-nvtx.log

if ! [ -x "$gpumem" ]; then
  echo "$0: no $gpumem; run make first (or set GPUMEM_BUILD)" >&2
  exit 2
fi
if ! [ -x "$sanitizer" ]; then
  echo "$0: compute-sanitizer not found; set COMPUTE_SANITIZER" >&2
  exit 2
fi
"$gpumem" --backend=cuda -q -c pass 2>/dev/null
if [ $? -eq 3 ]; then
  echo "$0: no CUDA device: skipped"
  exit 77
fi

: >"$summary"
failed=0
for mode in on off; do
  value=1
  [ "$mode" = off ] && value=0
  log=$out/memcheck-nvtx-$mode.log
  GPUMEM_NVTX=$value "$sanitizer" --tool memcheck --nvtx yes \
    --target-processes application-only --report-api-errors no \
    --print-limit 20 --log-file "$log.tool" \
    "$gpumem" --backend=cuda -q "$script" >"$log.out" 2>&1
  status=$?
  cat "$log.tool" "$log.out" >"$log" 2>/dev/null
  rm -f "$log.tool" "$log.out"
  if ! grep -q "past-end launched" "$log"; then
    verdict=FAIL
    failed=1
    seen="the script did not reach its kernel (exit $status)"
  elif grep -q "Invalid __global__ write" "$log"; then
    verdict=ok
    seen="Invalid __global__ write reported"
  else
    verdict=ok
    [ "$mode" = on ] && verdict=FAIL && failed=1
    seen="no invalid write reported"
  fi
  [ "$mode" = off ] && verdict=info
  printf '%-5s memcheck nvtx-%-3s exit %-3s %s\n' "$verdict" "$mode" \
    "$status" "$seen" | tee -a "$summary"
done
exit $failed
