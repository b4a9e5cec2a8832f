# gm_nccl.m4 -- optional NCCL for gpumem's collectives on device memory.
#
# GM_CHECK_NCCL  (after GM_CHECK_CUDA)
#   --with-nccl[=DIR|yes|no|check]  (default check: use NCCL where found)
#   NCCL_CFLAGS, NCCL_LIBS          flags to use instead of looking
#   Only with CUDA.  Looks in this order: NCCL_CFLAGS/NCCL_LIBS as given;
#   DIR (--with-nccl=DIR: DIR/include, DIR/lib64 or DIR/lib); the CUDA
#   toolkit configure chose (nccl.h beside cuda_runtime_api.h); the
#   compiler's own search path (a system package: libnccl-dev).  Checks
#   that nccl.h compiles (NCCL 2.14 or later: grouped sends and receives,
#   nonblocking communicators whose asynchronous error can be polled and
#   which can be aborted) and that a program calling them links.  gpumem
#   itself does not link it: it opens libnccl.so.2 at run time
#   (src/comm/comm-nccl-load.c), the one in DIR or the toolkit first
#   (GM_NCCL_LIBRARY), so that a build runs where NCCL is absent.
#   Defines GM_HAVE_NCCL; sets the conditional GM_HAVE_NCCL; substitutes
#   NCCL_CFLAGS and NCCL_LIBS.  --with-nccl=yes or DIR stops when NCCL
#   cannot be used; check goes on without it.
AC_DEFUN([GM_CHECK_NCCL], [
AC_ARG_WITH([nccl],
  [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@],
    [run collectives on device memory with NCCL, from DIR or the CUDA toolkit or the system (default: check; needs CUDA)])],
  [], [with_nccl=check])
AC_ARG_VAR([NCCL_CFLAGS], [C preprocessor flags for NCCL (default: from --with-nccl=DIR or the CUDA toolkit)])
AC_ARG_VAR([NCCL_LIBS], [linker flags for NCCL (default: -lnccl, from --with-nccl=DIR or the CUDA toolkit)])

gm_have_nccl=no
gm_nccl_summary="no (collectives on device memory go through MPI)"

AS_IF([test "x$with_nccl" != xno && test "x$gm_have_cuda" != xyes], [
  AS_IF([test "x$with_nccl" != xcheck],
    [AC_MSG_ERROR([--with-nccl needs CUDA (configure found none, or --without-cuda was given)])])
  gm_nccl_summary="no (needs CUDA)"
  with_nccl=no])

AS_IF([test "x$with_nccl" != xno], [
  gm_nccl_candidates=
  AS_IF([test -n "$NCCL_CFLAGS$NCCL_LIBS"],
    [gm_nccl_candidates=given],
    [AS_CASE(["$with_nccl"],
      [yes|check], [gm_nccl_candidates="$gm_cuda_dir system"],
      [gm_nccl_candidates=$with_nccl])])
  gm_save_CPPFLAGS=$CPPFLAGS
  gm_save_LIBS=$LIBS
  for gm_nccl_where in $gm_nccl_candidates; do
    AS_CASE(["$gm_nccl_where"],
      [given], [gm_nccl_cflags=$NCCL_CFLAGS; gm_nccl_libs=${NCCL_LIBS:--lnccl}],
      [system], [gm_nccl_cflags=; gm_nccl_libs=-lnccl],
      [gm_nccl_libdir=$gm_nccl_where/lib64
       AS_IF([test -d "$gm_nccl_libdir"], [], [gm_nccl_libdir=$gm_nccl_where/lib])
       gm_nccl_cflags="-I$gm_nccl_where/include"
       gm_nccl_libs="-L$gm_nccl_libdir -Wl,-rpath,$gm_nccl_libdir -lnccl"])
    AC_MSG_CHECKING([for NCCL 2.14 or later in $gm_nccl_where])
    dnl A directory must hold nccl.h itself (CUDA's include path would
    dnl otherwise find another).
    AS_CASE(["$gm_nccl_where"], [given|system], [],
      [AS_IF([test -f "$gm_nccl_where/include/nccl.h"], [],
        [AC_MSG_RESULT([no ($gm_nccl_where/include/nccl.h is absent)])
         continue])])
    CPPFLAGS="$gm_nccl_cflags $CUDA_CFLAGS $gm_save_CPPFLAGS"
    LIBS="$gm_nccl_libs $CUDA_LIBS $gm_save_LIBS"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error NCCL 2.14 or later is needed
#endif]],
      [[ncclUniqueId id;
        ncclComm_t comm;
        ncclResult_t async;
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        if (ncclGetUniqueId (&id) != ncclSuccess
            || ncclCommInitRankConfig (&comm, 1, id, 0, &config) != ncclSuccess)
          return 1;
        ncclCommGetAsyncError (comm, &async);
        ncclGroupStart ();
        ncclSend (0, 0, ncclUint8, 0, comm, 0);
        ncclGroupEnd ();
        return (int) ncclCommAbort (comm);]])],
      [AC_MSG_RESULT([yes]); gm_have_nccl=yes],
      [AC_MSG_RESULT([no])])
    AS_IF([test "x$gm_have_nccl" = xyes], [
      NCCL_CFLAGS=$gm_nccl_cflags
      NCCL_LIBS=$gm_nccl_libs
      AC_COMPUTE_INT([gm_nccl_code], [NCCL_VERSION_CODE], [[#include <nccl.h>]])
      gm_nccl_summary="yes, $gm_nccl_where (NCCL code $gm_nccl_code)"
      break])
  done
  CPPFLAGS=$gm_save_CPPFLAGS
  LIBS=$gm_save_LIBS
  AS_IF([test "x$gm_have_nccl" = xyes],
    [AC_DEFINE([GM_HAVE_NCCL], [1], [Define to 1 to run collectives on device memory with NCCL])
     dnl The library is opened at run time (src/comm/comm-nccl-load.c):
     dnl the one found in a folder is tried before the library path.
     AS_CASE(["$gm_nccl_where"], [given|system], [],
       [AS_IF([test -f "$gm_nccl_libdir/libnccl.so.2"],
         [AC_DEFINE_UNQUOTED([GM_NCCL_LIBRARY], ["$gm_nccl_libdir/libnccl.so.2"],
            [The NCCL library configure found, opened at run time])
          gm_nccl_summary="$gm_nccl_summary, opened at run time from $gm_nccl_libdir/libnccl.so.2"])])],
    [AS_IF([test "x$with_nccl" != xcheck],
      [AC_MSG_ERROR([NCCL was asked for (--with-nccl=$with_nccl) but no working NCCL 2.14+ was found (see config.log).
  Install it (libnccl-dev), name its prefix (--with-nccl=DIR), give its
  flags (NCCL_CFLAGS=... NCCL_LIBS=...), or build without it (--without-nccl)])])
     NCCL_CFLAGS=
     NCCL_LIBS=
     gm_nccl_summary="no (not found; collectives on device memory go through MPI)"])
])
AM_CONDITIONAL([GM_HAVE_NCCL], [test "x$gm_have_nccl" = xyes])
AC_SUBST([NCCL_CFLAGS])
AC_SUBST([NCCL_LIBS])
])
