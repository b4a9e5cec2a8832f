# gm_nvrtc.m4 -- find NVRTC, CUDA's run-time compiler, for gpumem.jit.
#
# GM_CHECK_NVRTC (after GM_CHECK_CUDA)
#   --with-nvrtc=PATH  the NVRTC library to open (libnvrtc.so), or the
#                      folder holding it; default: the CUDA toolkit's,
#                      else whatever libnvrtc.so the dynamic loader finds
#                      at run time; --without-nvrtc leaves the default
#                      to the run-time search alone.
#   gpumem opens NVRTC with dlopen when a script first calls gpumem.jit,
#   so the program neither links it nor needs it to start; GPUMEM_NVRTC
#   names another library at run time.  Defines GM_NVRTC_LIBRARY (the
#   path found) when one was found.
AC_DEFUN([GM_CHECK_NVRTC], [
AC_ARG_WITH([nvrtc],
  [AS_HELP_STRING([--with-nvrtc=PATH],
    [NVRTC library or its folder for gpumem.jit (default: the CUDA toolkit's; opened at run time)])],
  [], [with_nvrtc=check])
AC_REQUIRE([AC_PROG_SED])

gm_nvrtc_library=
gm_nvrtc_summary="run-time search (libnvrtc.so, GPUMEM_NVRTC)"
AS_CASE(["$with_nvrtc"],
  [no], [gm_nvrtc_summary="run-time search only (--without-nvrtc)"],
  [yes|check], [
    for gm_dir in "$gm_cuda_libdir" "${gm_cuda_dir:+$gm_cuda_dir/lib64}" /usr/local/cuda/lib64; do
      AS_IF([test -n "$gm_dir"], [
        for gm_lib in "$gm_dir"/libnvrtc.so.[[0-9]]*; do
          AS_CASE(["$gm_lib"], [*builtins*|*alt*|*'*'*], [continue])
          AS_IF([test -f "$gm_lib"], [gm_nvrtc_library=$gm_lib; break 2])
        done
      ])
    done],
  [AS_IF([test -d "$with_nvrtc"],
     [for gm_lib in "$with_nvrtc"/libnvrtc.so.[[0-9]]* "$with_nvrtc"/libnvrtc.so; do
        AS_CASE(["$gm_lib"], [*builtins*|*alt*|*'*'*], [continue])
        AS_IF([test -f "$gm_lib"], [gm_nvrtc_library=$gm_lib; break])
      done],
     [gm_nvrtc_library=$with_nvrtc])
   AS_IF([test -z "$gm_nvrtc_library" || test ! -f "$gm_nvrtc_library"],
     [AC_MSG_ERROR([--with-nvrtc: no NVRTC library at '$with_nvrtc'])])])

AC_MSG_CHECKING([for NVRTC])
AS_IF([test -n "$gm_nvrtc_library"], [
  AC_MSG_RESULT([$gm_nvrtc_library])
  gm_nvrtc_summary="$gm_nvrtc_library (opened at run time)"
  AC_DEFINE_UNQUOTED([GM_NVRTC_LIBRARY], ["$gm_nvrtc_library"],
    [The NVRTC library gpumem.jit opens first])
], [
  AC_MSG_RESULT([not found; gpumem.jit searches at run time])
])
])
