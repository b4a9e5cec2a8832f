#!/bin/sh
# run-fuzzers.sh BUILDDIR SRCDIR [ENABLE] -- a bounded run of each
# libFuzzer target.
#
# Runs tests/fuzz/fuzz-{length,dtype,cli} (built by make check where
# configure found clang -fsanitize=fuzzer) for GM_FUZZ_RUNS inputs each
# (default 20000), and the targets where input crosses in from others,
# fuzz-{signature,jit-cache,plugin-table,ipc-handle} (docs/security.md),
# for GM_FUZZ_SECONDS each (default 60), those four side by side while the
# first three run.  GM_FUZZ_SEED sets libFuzzer's -seed (default 0: one
# from the clock, printed).  Each starts from the seed corpus in
# SRCDIR/tests/fuzz/corpus-NAME.  New inputs go to a scratch corpus under
# BUILDDIR, never into the source tree; a crash leaves its input as
# BUILDDIR/tests/fuzz/crash-* (replay: tests/fuzz/fuzz-NAME FILE).
# Exits 77 (ctest: skipped) when the targets were not built, saying why:
# ENABLE is configure's --enable-fuzzers value (no: --disable-fuzzers
# was given; yes or check: no compiler built one).
#
# Longer by hand, e.g. ten minutes of one target:
#   tests/fuzz/fuzz-length -max_total_time=600 CORPUS_DIR \
#       $SRCDIR/tests/fuzz/corpus-length
set -u
builddir=$1
srcdir=$2
enable=${3:-check}
runs=${GM_FUZZ_RUNS:-20000}
seconds=${GM_FUZZ_SECONDS:-60}
brief="length dtype cli"
timed="signature jit-cache plugin-table ipc-handle"
for name in $brief $timed; do
  target=$builddir/tests/fuzz/fuzz-$name
  if ! test -x "$target"; then
    if test "$enable" = no; then
      echo "$target not built (configured with --disable-fuzzers): skipped"
    else
      echo "$target not built (configure found no compiler that builds a libFuzzer target: FUZZ_CC, default clang, with -fsanitize=fuzzer; config.log says why): skipped"
    fi
    exit 77
  fi
done

# fuzz NAME LIMIT: runs fuzz-NAME with the libFuzzer limit LIMIT
# (-runs=N or -max_total_time=S); its summary, or its log's end on a
# finding.  Exits 0 or 1.
fuzz () {
  target=$builddir/tests/fuzz/fuzz-$1
  scratch=$builddir/tests/fuzz/corpus-$1.run
  rm -rf "$scratch"
  mkdir -p "$scratch"
  if ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
     "$target" "$2" -seed=${GM_FUZZ_SEED:-0} -max_len=4096 \
       -artifact_prefix="$builddir/tests/fuzz/" -print_final_stats=1 \
       "$scratch" "$srcdir/tests/fuzz/corpus-$1" 2>"$scratch.log"; then
    result=0
    echo "== fuzz-$1 ($2): no finding"
    grep -E "^(INFO: Seed|stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+[[:space:]]+DONE|Done)" "$scratch.log"
  else
    result=1
    echo "== fuzz-$1 ($2): FAILED"
    tail -n 60 "$scratch.log"
  fi
  rm -rf "$scratch" "$scratch.log"
  return $result
}

status=0
pids=
for name in $timed; do
  fuzz "$name" -max_total_time="$seconds" >"$builddir/tests/fuzz/$name.out" &
  pids="$pids $!"
done
for name in $brief; do
  fuzz "$name" -runs="$runs" || status=1
done
for pid in $pids; do
  wait "$pid" || status=1
done
for name in $timed; do
  cat "$builddir/tests/fuzz/$name.out"
  rm -f "$builddir/tests/fuzz/$name.out"
done
exit $status
