#!/bin/sh
# install-check.sh -- check an installed gpumem by itself, as its users
# would use it, with nothing from the source or build tree.
#
#   install-check.sh DESTDIR PREFIX LIBDIR INCLUDEDIR BINDIR PKGDATADIR \
#                    PYEXECDIR PYTHON CC
#
# 'make installcheck' runs it with the configured folders (and DESTDIR,
# empty unless staged: then every path is looked up under DESTDIR, and
# pkg-config's prefix is moved there); .ci/run runs
# that after 'make install DESTDIR=...'.  Each check_* function below is
# one check; it prints what it does and fails the script (set -e) on the
# first error.  A check that cannot run here says SKIP and why.  Checks
# of more installed things go beside the others, and into the list at
# the end.
set -eu

if [ $# -ne 9 ]; then
  echo "usage: $0 DESTDIR PREFIX LIBDIR INCLUDEDIR BINDIR PKGDATADIR PYEXECDIR PYTHON CC" >&2
  exit 2
fi
destdir=$1 prefix=$2 libdir=$3 includedir=$4 bindir=$5 pkgdatadir=$6
pyexecdir=$7 python=$8 cc=$9

# The installed folders as this machine sees them.
lib=$destdir$libdir
include=$destdir$includedir
bin=$destdir$bindir
data=$destdir$pkgdatadir
pyexec=$destdir$pyexecdir

work=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-install-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Nothing of the build tree, and the host backend: no GPU needed.
unset PYTHONPATH GPUMEM_PYTHON
GPUMEM_BACKEND=host
export GPUMEM_BACKEND
cd "$work"

step () {
  echo "== install-check: $*"
}

fail () {
  echo "install-check: FAIL: $*" >&2
  exit 1
}

# pkg-config on the installed gpumem.pc; staged under DESTDIR, its
# prefix is moved there.
gm_pkg_config () {
  PKG_CONFIG_PATH=$lib/pkgconfig \
    pkg-config --define-variable=prefix="$destdir$prefix" "$@" gpumem
}

check_files () {
  step "installed files"
  for f in "$lib/libgpumem.so" "$lib/pkgconfig/gpumem.pc" \
           "$include/gpumem/gpumem.h" "$include/gpumem/kernel.h" \
           "$bin/gpumem" "$data/scripts/stitching.py" \
           "$destdir$prefix/share/man/man1/gpumem.1"; do
    [ -e "$f" ] || fail "$f is not installed"
  done
  ls "$pyexec"/gpumem*.so >/dev/null 2>&1 \
    || fail "no extension module gpumem*.so in $pyexec"
  # The type stubs beside the module (PEP 561), gpumem.kernels' among
  # them with a def for each kernel of kernels.def.
  for f in __init__.pyi comm.pyi kernels.pyi; do
    [ -e "$pyexec/gpumem-stubs/$f" ] || fail "$pyexec/gpumem-stubs/$f is not installed"
  done
  grep -q '^def saxpy(' "$pyexec/gpumem-stubs/kernels.pyi" \
    || fail "$pyexec/gpumem-stubs/kernels.pyi has no def saxpy"
  # libtool's versioned name, and the link to it.
  ls "$lib"/libgpumem.so.*.*.* >/dev/null 2>&1 \
    || fail "libgpumem.so is not versioned"
}

check_pkg_config () {
  if ! command -v pkg-config >/dev/null; then
    step "pkg-config: SKIP (no pkg-config here)"
    return
  fi
  step "pkg-config --cflags --libs gpumem"
  flags=$(gm_pkg_config --cflags --libs)
  echo "   $flags"
  case " $flags " in
    *" -I$include "*) ;;
    *) fail "pkg-config --cflags lacks -I$include" ;;
  esac
  case " $flags " in
    *" -lgpumem "*) ;;
    *) fail "pkg-config --libs lacks -lgpumem" ;;
  esac
  [ "$(gm_pkg_config --modversion)" != "" ] || fail "no --modversion"
  # Read as it lies, without moving its prefix: gpumem.pc finds the
  # tree from its own place (staged, or installed with another prefix).
  scripts=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --variable=scriptsdir gpumem)
  [ "$(cd "$scripts" && pwd -P)" = "$(cd "$data/scripts" && pwd -P)" ] \
    || fail "scriptsdir is '$scripts', not $data/scripts"
  cflags=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --cflags-only-I gpumem)
  cflags=${cflags%% }
  [ "$(cd "${cflags#-I}" && pwd -P)" = "$(cd "$include" && pwd -P)" ] \
    || fail "pkg-config --cflags names '$cflags', not -I$include"
}

# Every installed header compiles alone, in C (and in C++ where there is
# a C++ compiler), with only the installed include folder: no CUDA, and
# no Python either, but for a header written for Python extensions (one
# that includes <Python.h> itself, or through a gpumem header it
# includes), which gets Python's include folder and nothing more.
python_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
needs_python () {
  for f in "$1" $(sed -n 's|^#include <\(gpumem/[^>]*\)>.*|\1|p' "$1"); do
    case $f in
      gpumem/*) f=$include/$f ;;
    esac
    [ -f "$f" ] && grep -q '^#include <Python.h>' "$f" && return 0
  done
  return 1
}
# The C++ headers (gpumem/array.hpp and the casters over it) compile
# alone in C++17 with Python's headers and, for a caster, its library's
# (pybind11 or nanobind, as the configured Python imports it; SKIP
# without it).
cxx_library_flags () {
  library=$(sed -n 's#^\#include <\(pybind11\|nanobind\)/.*#\1#p' "$1" | head -n 1)
  case $library in
    pybind11)
      "$python" -c 'import pybind11; print("-I" + pybind11.get_include())' 2>/dev/null ;;
    nanobind)
      "$python" -c 'import nanobind, os; d = nanobind.include_dir(); print("-I" + d, "-I" + os.path.join(os.path.dirname(d), "ext", "robin_map", "include"))' 2>/dev/null ;;
    *) echo "" ;;
  esac
}
check_cxx_headers_alone () {
  if ! command -v c++ >/dev/null; then
    step "the C++ headers compile alone: SKIP (no c++ here)"
    return
  fi
  for h in "$include"/gpumem/array.hpp "$include"/gpumem/pybind11.h \
           "$include"/gpumem/nanobind.h; do
    name=gpumem/$(basename "$h")
    [ -f "$h" ] || fail "$name is not installed"
    if ! library=$(cxx_library_flags "$h"); then
      step "$name compiles alone in C++: SKIP ($python imports neither pybind11 nor nanobind for it)"
      continue
    fi
    step "$name compiles alone in C++ (with Python's headers $library)"
    printf '#include <%s>\n#include <%s>\nint main () { return 0; }\n' \
      "$name" "$name" > alone.cc
    # shellcheck disable=SC2086
    c++ -std=c++17 -Wall -Wextra -Werror -I"$include" -I"$python_include" \
      $library -c alone.cc -o alone.o \
      || fail "$name does not compile alone in C++"
  done
}
check_headers_alone () {
  for h in "$include"/gpumem/*.h; do
    name=gpumem/$(basename "$h")
    case $name in
      gpumem/pybind11.h|gpumem/nanobind.h) continue ;;   # C++: above
    esac
    flags=-I$include
    if needs_python "$h"; then
      step "$name compiles alone (no CUDA; Python's headers, as it includes them)"
      flags="$flags -I$python_include"
    else
      step "$name compiles alone (no Python, no CUDA)"
    fi
    printf '#include <%s>\n#include <%s>\nint main (void) { return 0; }\n' \
      "$name" "$name" > alone.c
    # shellcheck disable=SC2086
    $cc -std=c11 -Wall -Wextra -Werror -pedantic $flags -c alone.c \
      -o alone.o || fail "$name does not compile alone in C"
    if command -v c++ >/dev/null; then
      cp alone.c alone.cc
      # shellcheck disable=SC2086
      c++ -Wall -Wextra -Werror $flags -c alone.cc -o alone.o \
        || fail "$name does not compile alone in C++"
    else
      echo "   in C++: SKIP (no c++ here)"
    fi
  done
}

# A program linked with libgpumem through pkg-config starts, its
# libraries found.
check_link () {
  if ! command -v pkg-config >/dev/null; then
    step "link with libgpumem: SKIP (no pkg-config here)"
    return
  fi
  step "a C program links with libgpumem and starts"
  printf '#include <gpumem/gpumem.h>\nint main (void) { gm_launch_cfg cfg = {0}; return cfg.sm_count; }\n' > linked.c
  # shellcheck disable=SC2046
  $cc -std=c11 -Wl,--no-as-needed linked.c $(gm_pkg_config --cflags --libs) \
    -o linked || fail "cannot link with libgpumem"
  LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ./linked \
    || fail "the program linked with libgpumem does not start"
  LD_LIBRARY_PATH=$lib ldd ./linked | grep -q "libgpumem.so.* => $lib" \
    || fail "the program did not load the installed libgpumem"
}

# A plain python imports the installed extension module (PYTHONPATH at
# the folder configure's summary names), and its get_include() names
# the installed headers' folder, where it lies.
check_import () {
  step "python3 -c 'import gpumem' (PYTHONPATH=$pyexec)"
  PYTHONPATH=$pyexec "$python" -c '
import os, sys
import numpy as np
import gpumem
where = os.path.dirname(os.path.realpath(gpumem.__file__))
assert where == os.path.realpath(sys.argv[1]), where
assert gpumem.backend == "host", gpumem.backend
x = gpumem.to_device(np.arange(4, dtype=np.float32))
y = gpumem.zeros(4)
gpumem.kernels.saxpy(4, 2.0, x, y)
assert y.copy_to_host().tolist() == [0.0, 2.0, 4.0, 6.0]
include = gpumem.get_include()
# Where the headers are, also when the tree was staged or installed
# with another prefix than configure was given.
assert include == os.path.realpath(sys.argv[3]), (include, sys.argv[3])
assert os.path.isfile(sys.argv[3] + "/gpumem/extension.h"), sys.argv[3]
print("   imported", gpumem.__file__, "headers", include)' \
    "$pyexec" "$includedir" "$include" \
    || fail "the installed extension module does not import and run"
}

# The installed program runs the installed example, as the installed
# manual page says, and its children find the installed module.
check_program () {
  step "$bindir/gpumem -V"
  "$bin/gpumem" -V || fail "gpumem -V"
  step "the installed program's gpumem.get_include() is where the headers are"
  got=$("$bin/gpumem" -q -c 'import gpumem; print(gpumem.get_include())')
  [ "$got" = "$(cd "$include" && pwd -P)" ] \
    || fail "gpumem.get_include() is '$got', not $include"
  step "gpumem $pkgdatadir/scripts/stitching.py"
  "$bin/gpumem" -q "$data/scripts/stitching.py" > stitching.out \
    || fail "the installed stitching.py failed"
  tail -n 3 stitching.out
  grep -q "gpumem $pkgdatadir/scripts/stitching.py" \
    "$destdir$prefix/share/man/man1/gpumem.1" \
    || fail "the installed manual page does not name the installed script"
  step "a spawned child of the installed program imports gpumem"
  cat > spawn_child.py <<'PY'
import multiprocessing, os, sys

def child(_):
    import gpumem
    return os.path.dirname(gpumem.__file__), gpumem.backend

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        where, backend = pool.map(child, [0])[0]
    assert os.path.realpath(where) == os.path.realpath(sys.argv[1]), where
    assert backend == "host", backend
PY
  "$bin/gpumem" -q spawn_child.py "$pyexec" \
    || fail "a child of the installed program cannot import gpumem"
}

# The installed examples (share/gpumem/examples): a plugin, an embedding
# C++ program and a Python extension, each built against this installed
# tree alone as a user builds it, then run (examples/run-examples.sh).
check_examples () {
  step "the installed examples, built and run"
  sh "$data/examples/run-examples.sh" "$destdir$prefix" \
    || fail "an installed example failed"
}

check_files
check_pkg_config
check_headers_alone
check_cxx_headers_alone
check_link
check_import
check_program
check_examples
echo "install-check: all passed"
