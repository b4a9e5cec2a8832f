# gm_cuda.m4 -- find the CUDA toolkit and check that it builds a kernel.
#
# GM_CHECK_CUDA
#   --with-cuda=DIR    toolkit root (default: /usr/local/cuda, else the
#                      folder above the nvcc on PATH); --without-cuda builds
#                      the host backend alone.
#   --with-cuda-arch=FLAGS, or NVCC_ARCH=FLAGS
#                      nvcc's code-generation flags (default: native code
#                      for Hopper, sm_90, plus compute_90 PTX that newer
#                      GPUs compile at load time).
#   Substitutes NVCC, NVCC_ARCH, NVCCFLAGS, CUDA_CFLAGS, CUDA_LIBS;
#   defines GM_HAVE_CUDA; sets the conditional GM_HAVE_CUDA.
AC_DEFUN([GM_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda=DIR],
    [CUDA toolkit root (default: /usr/local/cuda or nvcc's); --without-cuda for a host-only build])],
  [], [with_cuda=check])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=FLAGS],
    [nvcc code-generation flags (default: sm_90 code plus compute_90 PTX)])],
  [NVCC_ARCH=$withval], [])
AC_ARG_VAR([NVCC_ARCH], [nvcc code-generation flags (as --with-cuda-arch)])
AC_ARG_VAR([NVCCFLAGS], [extra flags for nvcc])

gm_have_cuda=no
gm_cuda_summary="no (host backend only)"
gm_cuda_arch_summary="-"
AS_IF([test "x$with_cuda" != xno], [
  gm_cuda_dir=
  AS_CASE(["$with_cuda"],
    [yes|check], [
      AS_IF([test -x /usr/local/cuda/bin/nvcc], [gm_cuda_dir=/usr/local/cuda], [
        gm_nvcc_path=`command -v nvcc 2>/dev/null`
        AS_IF([test -n "$gm_nvcc_path"],
              [gm_cuda_dir=`dirname "$gm_nvcc_path"`; gm_cuda_dir=`dirname "$gm_cuda_dir"`])])],
    [gm_cuda_dir=$with_cuda])

  AC_MSG_CHECKING([for nvcc])
  AS_IF([test -n "$gm_cuda_dir" && test -x "$gm_cuda_dir/bin/nvcc"], [
    NVCC="$gm_cuda_dir/bin/nvcc"
    AC_MSG_RESULT([$NVCC])
  ], [
    AC_MSG_RESULT([no])
    AS_IF([test "x$with_cuda" != xcheck],
      [AC_MSG_ERROR([no nvcc under '${gm_cuda_dir:-$with_cuda}'; give --with-cuda=DIR, or --without-cuda])])
  ])
])

AS_IF([test -n "$NVCC"], [
  gm_cuda_version=`"$NVCC" --version | $SED -n 's/.*release \(@<:@0-9.@:>@*\),.*/\1/p'`
  AS_IF([test -z "$NVCC_ARCH"],
    [NVCC_ARCH="-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"])
  gm_cuda_libdir=$gm_cuda_dir/lib64
  AS_IF([test -d "$gm_cuda_libdir"], [], [gm_cuda_libdir=$gm_cuda_dir/lib])
  CUDA_CFLAGS="-I$gm_cuda_dir/include"
  dnl nvcc emits C++ host code (static guards), hence libstdc++.
  dnl The static runtime loads the driver (libcuda.so) at run time, so the
  dnl program starts, and falls back to the host backend, where none is.
  CUDA_LIBS="-L$gm_cuda_libdir -lcudart_static -ldl -lrt -lpthread -lstdc++"

  gm_save_CPPFLAGS=$CPPFLAGS
  gm_save_LIBS=$LIBS
  CPPFLAGS="$CUDA_CFLAGS $CPPFLAGS"
  LIBS="$CUDA_LIBS $LIBS"
  AC_CHECK_HEADER([cuda_runtime_api.h], [], [AC_MSG_ERROR([cuda_runtime_api.h not found in $gm_cuda_dir/include])])
  AC_MSG_CHECKING([for libcudart_static])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>]],
                                  [[int n; return (int) cudaGetDeviceCount (&n);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([cannot link with the CUDA runtime ($CUDA_LIBS)])])
  CPPFLAGS=$gm_save_CPPFLAGS
  LIBS=$gm_save_LIBS

  AC_MSG_CHECKING([whether nvcc builds a __global__ kernel for $NVCC_ARCH])
  cat > conftest.cu <<GM_EOF
__global__ void gm_conftest (float *y, const float *x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[[i]] += 2.0f * x[[i]];
}
int main (void) { gm_conftest<<<1, 32>>> (0, 0, 0); return 0; }
GM_EOF
  AS_IF([$NVCC $NVCC_ARCH $NVCCFLAGS -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([nvcc cannot compile a kernel with '$NVCC_ARCH' (see config.log); set --with-cuda-arch])])
  rm -f conftest.cu conftest.$OBJEXT
  gm_have_cuda=yes
  gm_cuda_summary="$gm_cuda_dir (CUDA $gm_cuda_version)"
  gm_cuda_arch_summary=$NVCC_ARCH
  AC_DEFINE([GM_HAVE_CUDA], [1], [Define to 1 to build the CUDA backend])
])
AM_CONDITIONAL([GM_HAVE_CUDA], [test "x$gm_have_cuda" = xyes])
AC_SUBST([NVCC])
AC_SUBST([NVCC_ARCH])
AC_SUBST([NVCCFLAGS])
AC_SUBST([CUDA_CFLAGS])
AC_SUBST([CUDA_LIBS])
])
