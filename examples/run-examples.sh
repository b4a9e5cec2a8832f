#!/bin/sh
# run-examples.sh PREFIX -- builds each example in examples/ against the
# gpumem installed under PREFIX alone, as a user builds it in a folder
# of their own, and runs it: plugin/ (make with pkg-config; nvcc when
# there is one, else the C++ compiler), embed/ (CMake with pkg-config),
# extension/ (a Python C extension through gpumem._C_API), pybind11/
# and nanobind/ (the stitching workload's algo as C++ modules through
# gpumem/pybind11.h and gpumem/nanobind.h, built with CMake; the CUDA
# path where CMake finds a CUDA compiler).
#
# PREFIX may be a staged or moved tree (make install DESTDIR=D: give
# D/usr/local): gpumem.pc finds its prefix from where it lies.  Backend: GPUMEM_BACKEND
# (default host).  Prints "PASS NAME", "FAIL NAME" or "SKIP NAME: why"
# for each; exits 1 if any failed, else 0.
set -u

if test $# -ne 1 || test ! -d "$1"; then
  echo "usage: run-examples.sh PREFIX (an installed gpumem)" >&2
  exit 2
fi
prefix=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
backend=${GPUMEM_BACKEND:-host}
export GPUMEM_BACKEND=$backend
work=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-examples.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failed=0

pc=
for dir in "$prefix/lib/pkgconfig" "$prefix/lib64/pkgconfig" \
           "$prefix/share/pkgconfig"; do
  test -f "$dir/gpumem.pc" && pc=$dir/gpumem.pc && break
done
if test ! -x "$prefix/bin/gpumem" || test -z "$pc"; then
  echo "run-examples.sh: no bin/gpumem or gpumem.pc under $prefix" >&2
  exit 1
fi
# gpumem.pc finds its prefix from its own place: read where it lies.
export PATH="$prefix/bin:$PATH"
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

run () {   # run NAME COMMAND...: in $work/NAME, logged
  name=$1
  shift
  if (cd "$work/$name" && "$@") >"$work/$name.log" 2>&1; then
    return 0
  fi
  echo "FAIL $name: $*"
  while IFS= read -r line; do printf '    %s\n' "$line"; done < "$work/$name.log"
  failed=1
  return 1
}

for name in plugin embed extension pybind11 nanobind; do
  cp -R "$here/$name" "$work/$name"
done

# The plugin: nvcc where there is one; else the C++ compiler alone.
cuda=no
command -v "${NVCC:-nvcc}" >/dev/null 2>&1 && cuda=yes
run plugin make CUDA=$cuda && run plugin make check && \
  echo "PASS plugin (CUDA=$cuda, backend $backend)"

# The embedding program, with CMake.
if ! command -v cmake >/dev/null; then
  echo "SKIP embed: no cmake"
elif run embed cmake -S . -B build && run embed cmake --build build && \
     run embed build/embed "$backend"; then
  echo "PASS embed (backend $backend)"
fi

# The extension, against the Python gpumem embeds.
python=$(gpumem -q -c 'import sys; print(sys.executable)' 2>/dev/null)
pyconfig=${PYTHON_CONFIG:-$python-config}
if ! command -v "$pyconfig" >/dev/null 2>&1; then
  echo "SKIP extension: no $pyconfig (the embedded Python's python3-config)"
elif run extension make PYTHON_CONFIG="$pyconfig" && \
     run extension make PYTHON_CONFIG="$pyconfig" check; then
  echo "PASS extension (backend $backend)"
fi

# The C++ binding modules, with the pybind11 or nanobind that the
# embedded Python imports, its CMake files found through it.  CUDA from
# gpumem.pc's nvcc where there is one.
cudacxx=$(pkg-config --variable=nvcc gpumem 2>/dev/null)
for lib in pybind11 nanobind; do
  case $lib in
    pybind11) dirflag=-Dpybind11_DIR cmakedir=--cmakedir ;;
    nanobind) dirflag=-Dnanobind_DIR cmakedir=--cmake_dir ;;
  esac
  if ! command -v cmake >/dev/null; then
    echo "SKIP $lib: no cmake"
  elif ! libdir=$("$python" -m $lib $cmakedir 2>/dev/null); then
    echo "SKIP $lib: $python cannot import $lib (pip install $lib)"
  elif run $lib env ${cudacxx:+CUDACXX=$cudacxx} cmake -S . -B build \
         -DPython_EXECUTABLE="$python" "$dirflag=$libdir" && \
       run $lib cmake --build build && \
       run $lib env PYTHONPATH=build gpumem test.py algo_$lib; then
    echo "PASS $lib (backend $backend)"
  fi
done

exit $failed
