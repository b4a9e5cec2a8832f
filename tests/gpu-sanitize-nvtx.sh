#!/bin/sh
# gpu-sanitize-nvtx.sh OUTDIR -- compute-sanitizer's memcheck reports a
# write one past a DeviceArray with NVTX annotation off and on, and
# annotation on draws no refused NVTX call.
#
# Runs tests/fuzz/sanitize_past_end.py, a kernel writing one float past a
# DeviceArray of 1000 floats made right after a 64 MiB array was freed,
# under memcheck twice, GPUMEM_NVTX=1 (nvtx-on) and GPUMEM_NVTX=0
# (nvtx-off).  Each run passes when memcheck's log has an "Invalid
# __global__ write" (each array is its own allocation of its exact size,
# so memcheck knows its extent) and no "Call to nvtx... failed" warning
# (a refused NVTX call: gpumem makes only ranges).  The script's own exit status is not
# judged: memcheck makes the faulting launch fail.
# Logs: OUTDIR/memcheck-nvtx-on.log, OUTDIR/memcheck-nvtx-off.log; a line
# each in OUTDIR/summary-nvtx.log.  Exits 0 when both runs pass, 1 when
# not, 2 for a usage error, 77 without a CUDA device.  Needs gpumem.jit,
# so NVRTC.  Run from the build folder after make (tests/gpu-sanitize.sh
# calls it); GPUMEM_BUILD, GM_SRCDIR and COMPUTE_SANITIZER as there.
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
  verdict=ok
  if grep -q "Invalid __global__ write" "$log"; then
    seen="Invalid __global__ write reported"
  else
    verdict=FAIL
    seen="no invalid write reported"
  fi
  refused=$(grep -c "Call to nvtx.* failed" "$log")
  if [ "$refused" -gt 0 ]; then
    seen="$seen; $refused refused NVTX calls"
    verdict=FAIL
  fi
  [ "$verdict" = FAIL ] && failed=1
  printf '%-5s memcheck nvtx-%-3s exit %-3s %s\n' "$verdict" "$mode" \
    "$status" "$seen" | tee -a "$summary"
done
exit $failed
