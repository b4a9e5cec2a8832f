#!/bin/sh
# gpu-sanitize.sh OUTDIR -- gpumem under NVIDIA compute-sanitizer, on a GPU.
#
# Runs src/gpumem --backend=cuda under each compute-sanitizer tool:
#   memcheck --leak-check full   tests/test_kernels.py, tests/test_copy.py,
#                                tests/test_array.py, scripts/stitching.py,
#                                tests/fuzz/sanitize_workload.py; then
#                                tests/gpu-sanitize-nvtx.sh (a write past
#                                an array, reported with GPUMEM_NVTX 0 and 1)
#   racecheck, initcheck,        scripts/stitching.py (small) and
#   synccheck                    tests/fuzz/sanitize_workload.py
# Each run's report goes to OUTDIR/TOOL-NAME.log; OUTDIR/summary.log
# collects every run's exit status and ERROR SUMMARY line.  Exits 1 when
# any tool reports an error or any run fails, 2 for a usage error, 77
# when no CUDA device answers.
#
# Run from the build folder (in-tree builds: the repository root), after
# configure; GPUMEM_BUILD and GM_SRCDIR name the build and source folders
# otherwise.  It first makes what it runs (src/gpumem and the test
# program tests/gpumem-test, which make alone does not build; MAKE names
# make).  About 3 minutes on an H200.
#
# Choices:
#  - Only the application process is sanitized (--target-processes
#    application-only): the tests start children of their own, among
#    them a kernel that faults on purpose (test_kernels.py), whose
#    errors are expected and tested there.
#  - --report-api-errors no: gpumem checks the status of every CUDA call
#    and turns failures into Python exceptions, which fail the script;
#    the tests provoke some on purpose (out of memory), which memcheck
#    would otherwise count.
#  - initcheck, racecheck and synccheck run only the small workloads
#    (they are slow, and initcheck would flag the tests that copy back
#    gpumem.empty() memory on purpose).
#  - GM_SANITIZE_TOOLS (default "memcheck racecheck initcheck synccheck")
#    picks tools; COMPUTE_SANITIZER names the program.
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
tools=${GM_SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
summary=$out/summary.log

if ! [ -f "$build/Makefile" ]; then
  echo "$0: no $build/Makefile; run configure first (or set GPUMEM_BUILD)" >&2
  exit 2
fi
if ! ${MAKE:-make} -C "$build" src/gpumem tests/gpumem-test \
     >"$out/build.log" 2>&1; then
  tail -n 30 "$out/build.log" >&2
  echo "$0: building src/gpumem tests/gpumem-test failed" \
    "(log: $out/build.log)" >&2
  exit 2
fi
for program in "$gpumem" "$build/tests/gpumem-test"; do
  if ! [ -x "$program" ]; then
    echo "$0: no $program after make" >&2
    exit 2
  fi
done
if ! [ -x "$sanitizer" ]; then
  echo "$0: compute-sanitizer not found; set COMPUTE_SANITIZER" >&2
  exit 2
fi
"$gpumem" --backend=cuda -q -c pass 2>/dev/null
if [ $? -eq 3 ]; then
  echo "$0: no CUDA device: skipped"
  exit 77
fi

GPUMEM=$gpumem
GPUMEM_TEST=$build/tests/gpumem-test
GM_SRCDIR=$src
GPUMEM_BACKEND=cuda
PYTHONPATH=$src/tests${PYTHONPATH:+:$PYTHONPATH}
GM_WORKLOAD_N=${GM_WORKLOAD_N:-20000}
export GPUMEM GPUMEM_TEST GM_SRCDIR GPUMEM_BACKEND PYTHONPATH GM_WORKLOAD_N

: >"$summary"
failed=0
start_all=$(date +%s)

# run TOOL NAME SCRIPT [ARG]...
run() {
  tool=$1 name=$2
  shift 2
  log=$out/$tool-$name.log
  extra=
  if [ "$tool" = memcheck ]; then
    extra="--leak-check full"
  fi
  start=$(date +%s)
  # shellcheck disable=SC2086
  "$sanitizer" --tool "$tool" $extra --target-processes application-only \
    --report-api-errors no --print-limit 100 --log-file "$log.tool" \
    "$gpumem" --backend=cuda -q "$@" >"$log.out" 2>&1
  status=$?
  cat "$log.tool" "$log.out" >"$log" 2>/dev/null
  rm -f "$log.tool" "$log.out"
  # racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E
  # errors, W warnings)", the other tools with "ERROR SUMMARY: E errors".
  line=$(grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$log" | tail -n 1)
  errors=$(printf '%s\n' "$line" | sed -n \
    -e 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' \
    -e 's/.*RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p')
  verdict=ok
  if [ "$status" -ne 0 ] || [ -z "$errors" ] || [ "$errors" -ne 0 ]; then
    verdict=FAIL
    failed=1
  fi
  printf '%-5s %-10s %-22s exit %-3s %4ss  %s\n' "$verdict" "$tool" "$name" \
    "$status" "$(( $(date +%s) - start ))" "${line:-no ERROR SUMMARY line}" \
    | tee -a "$summary"
}

for tool in $tools; do
  case $tool in
    memcheck)
      run memcheck test_kernels "$src/tests/test_kernels.py"
      run memcheck test_copy "$src/tests/test_copy.py"
      run memcheck test_array "$src/tests/test_array.py"
      run memcheck stitching "$src/scripts/stitching.py"
      run memcheck workload "$src/tests/fuzz/sanitize_workload.py"
      # A write one past an array must be reported, NVTX annotation on
      # and off (runs of their own, whose errors are the expected ones).
      GPUMEM_BUILD=$build GM_SRCDIR=$src COMPUTE_SANITIZER=$sanitizer \
        "$src/tests/gpu-sanitize-nvtx.sh" "$out"
      case $? in
        0) ;;
        *) failed=1 ;;
      esac
      cat "$out/summary-nvtx.log" >>"$summary" 2>/dev/null
      ;;
    racecheck|initcheck|synccheck)
      run "$tool" stitching "$src/scripts/stitching.py" --images 4000 \
        --iterations 3
      run "$tool" workload "$src/tests/fuzz/sanitize_workload.py"
      ;;
    *)
      echo "$0: unknown tool '$tool'" >&2
      exit 2
      ;;
  esac
done

echo "total $(( $(date +%s) - start_all ))s; logs in $out" | tee -a "$summary"
exit $failed
