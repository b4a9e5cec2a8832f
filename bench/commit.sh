# commit.sh -- sourced by run.sh and nccl.sh (POSIX sh).
#
# bench_commit TOP prints the commit a report is stamped with: the
# BENCH_COMMIT environment variable when it is set and not empty (for a
# tree without .git: an unpacked tarball, a copy on a GPU machine; give
# the hash the tree was made from), else git's short hash of HEAD when
# TOP is itself the top of a git checkout (not a folder inside another
# repository, whose HEAD would be some other project's), followed by
# " (with uncommitted changes)" when tracked files differ from it, else
# "? (no git checkout: set BENCH_COMMIT)".
bench_commit () {
  if test -n "${BENCH_COMMIT:-}"; then
    echo "$BENCH_COMMIT"
    return 0
  fi
  toplevel=$(git -C "$1" rev-parse --show-toplevel 2>/dev/null) || toplevel=
  if test -n "$toplevel" \
     && test "$(cd "$toplevel" && pwd -P)" = "$(cd "$1" && pwd -P)" \
     && hash=$(git -C "$1" rev-parse --short HEAD 2>/dev/null); then
    if test -n "$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null)"; then
      echo "$hash (with uncommitted changes)"
    else
      echo "$hash"
    fi
  else
    echo "? (no git checkout: set BENCH_COMMIT)"
  fi
}
