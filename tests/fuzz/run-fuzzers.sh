#!/bin/sh
# run-fuzzers.sh BUILDDIR SRCDIR -- a short run of each libFuzzer target.
#
# Runs tests/fuzz/fuzz-{length,dtype,cli,signature} (built by make check where
# configure found clang -fsanitize=fuzzer) for GM_FUZZ_RUNS inputs each
# (default 20000; GM_FUZZ_SEED sets libFuzzer's -seed, default 0: one
# from the clock, printed), starting from the seed corpus in
# SRCDIR/tests/fuzz/corpus-NAME.  New inputs go to a scratch corpus under
# BUILDDIR, never into the source tree; a crash leaves its input as
# BUILDDIR/tests/fuzz/crash-* (replay: tests/fuzz/fuzz-NAME FILE).
# Exits 77 (ctest: skipped) when the targets were not built.
#
# Longer by hand, e.g. ten minutes of one target:
#   tests/fuzz/fuzz-length -max_total_time=600 CORPUS_DIR \
#       $SRCDIR/tests/fuzz/corpus-length
set -u
builddir=$1
srcdir=$2
runs=${GM_FUZZ_RUNS:-20000}
status=0
for name in length dtype cli signature; do
  target=$builddir/tests/fuzz/fuzz-$name
  if ! test -x "$target"; then
    echo "$target not built (configure found no clang -fsanitize=fuzzer): skipped"
    exit 77
  fi
done
for name in length dtype cli signature; do
  target=$builddir/tests/fuzz/fuzz-$name
  scratch=$builddir/tests/fuzz/corpus-$name.run
  rm -rf "$scratch"
  mkdir -p "$scratch"
  echo "== fuzz-$name: $runs runs"
  if ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
     "$target" -runs="$runs" -seed=${GM_FUZZ_SEED:-0} -max_len=4096 \
       -artifact_prefix="$builddir/tests/fuzz/" -print_final_stats=1 \
       "$scratch" "$srcdir/tests/fuzz/corpus-$name" 2>"$scratch.log"; then
    grep -E "^(INFO: Seed|stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+[[:space:]]+DONE)" "$scratch.log"
  else
    status=1
    tail -n 60 "$scratch.log"
  fi
  rm -rf "$scratch" "$scratch.log"
done
exit $status
