# gm_mpi.m4 -- optional MPI (Open MPI) for gpumem.comm.
#
# GM_CHECK_MPI
#   --with-mpi[=yes|no|check]  (default check: use MPI where it is found)
#   MPI_CFLAGS, MPI_LIBS       flags to use instead of looking (precious)
#   Looks in this order: MPI_CFLAGS/MPI_LIBS as given; pkg-config's
#   ompi-c; the wrapper compiler MPICC (default mpicc) asked with
#   --showme:compile and --showme:link (Open MPI).  Checks that a program
#   calling MPI_Init_thread compiles and links, and whether <mpi-ext.h>
#   exists (Open MPI's CUDA-awareness query lives there).
#   Defines GM_HAVE_MPI (and HAVE_MPI_EXT_H); sets the conditional
#   GM_HAVE_MPI; substitutes MPI_CFLAGS, MPI_LIBS and GM_MPIRUN (the
#   mpirun the tests launch jobs with; empty without MPI, which leaves
#   the MPI tests out of the suite) and GM_MPIRUN_MODULE (the mpirun the
#   extension module's tests run plain pythons under: GM_MPIRUN, else
#   the one on PATH, for a build without MPI whose module runs jobs over
#   mpi4py).  --with-mpi=yes stops when MPI
#   cannot be used; check goes on without it.
AC_DEFUN([GM_CHECK_MPI], [
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi@<:@=yes|no|check@:>@],
    [build gpumem.comm on MPI (Open MPI) for scripts run by mpirun (default: check)])],
  [], [with_mpi=check])
AC_ARG_VAR([MPI_CFLAGS], [C preprocessor flags for MPI (default: from pkg-config ompi-c or mpicc --showme)])
AC_ARG_VAR([MPI_LIBS], [linker flags for MPI (default: from pkg-config ompi-c or mpicc --showme)])
AC_ARG_VAR([MPICC], [the MPI wrapper compiler asked for flags (default: mpicc)])
AC_ARG_VAR([MPIRUN], [the launcher the MPI tests use (default: mpirun beside mpicc, else on PATH)])

gm_have_mpi=no
gm_mpi_summary="no (gpumem.comm absent)"
GM_MPIRUN=
AS_CASE(["$with_mpi"],
  [yes|no|check], [],
  [AC_MSG_ERROR([--with-mpi takes yes, no or check, not '$with_mpi'; give the flags as MPI_CFLAGS= MPI_LIBS=])])

AS_IF([test "x$with_mpi" != xno], [
  gm_mpi_source=
  gm_mpicc_path=
  AC_MSG_CHECKING([for MPI compiler and linker flags])
  AS_IF([test -n "$MPI_CFLAGS$MPI_LIBS"], [gm_mpi_source="MPI_CFLAGS/MPI_LIBS"])
  AS_IF([test -z "$gm_mpi_source"], [
    AS_IF([test -z "$PKG_CONFIG"], [PKG_CONFIG=`command -v pkg-config 2>/dev/null`])
    AS_IF([test -n "$PKG_CONFIG" && "$PKG_CONFIG" --exists ompi-c 2>/dev/null], [
      MPI_CFLAGS=`"$PKG_CONFIG" --cflags ompi-c`
      MPI_LIBS=`"$PKG_CONFIG" --libs ompi-c`
      gm_mpi_source="pkg-config ompi-c"])])
  AS_IF([test -z "$gm_mpi_source"], [
    AS_IF([test -z "$MPICC"], [MPICC=mpicc])
    gm_mpicc_path=`command -v "$MPICC" 2>/dev/null`
    AS_IF([test -n "$gm_mpicc_path" \
           && gm_mpi_cflags=`"$gm_mpicc_path" --showme:compile 2>/dev/null` \
           && gm_mpi_libs=`"$gm_mpicc_path" --showme:link 2>/dev/null`], [
      MPI_CFLAGS=$gm_mpi_cflags
      MPI_LIBS=$gm_mpi_libs
      gm_mpi_source="$gm_mpicc_path --showme"])])
  AS_IF([test -n "$gm_mpi_source"],
    [AC_MSG_RESULT([$gm_mpi_source])],
    [AC_MSG_RESULT([not found])])

  AS_IF([test -n "$gm_mpi_source"], [
    gm_save_CPPFLAGS=$CPPFLAGS
    gm_save_LIBS=$LIBS
    CPPFLAGS="$MPI_CFLAGS $CPPFLAGS"
    LIBS="$MPI_LIBS $LIBS"
    AC_MSG_CHECKING([whether a program calling MPI_Init_thread links])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
      [[int provided;
        if (MPI_Init_thread (0, 0, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
          return 1;
        return MPI_Finalize ();]])],
      [AC_MSG_RESULT([yes]); gm_have_mpi=yes],
      [AC_MSG_RESULT([no])])
    AS_IF([test "x$gm_have_mpi" = xyes],
      [AC_CHECK_HEADERS([mpi-ext.h], [], [], [[#include <mpi.h>]])])
    CPPFLAGS=$gm_save_CPPFLAGS
    LIBS=$gm_save_LIBS
  ])

  AS_IF([test "x$gm_have_mpi" = xyes], [
    AS_IF([test -z "$MPIRUN"], [
      gm_mpirun_dir=
      AS_IF([test -n "$gm_mpicc_path"], [gm_mpirun_dir=`dirname "$gm_mpicc_path"`])
      AS_IF([test -n "$gm_mpirun_dir" && test -x "$gm_mpirun_dir/mpirun"],
        [MPIRUN=$gm_mpirun_dir/mpirun],
        [MPIRUN=`command -v mpirun 2>/dev/null`])])
    GM_MPIRUN=$MPIRUN
    gm_mpi_version=`"$MPIRUN" --version 2>/dev/null | $SED -n 1p`
    gm_mpi_summary="yes, $gm_mpi_source${gm_mpi_version:+ ($gm_mpi_version)}"
    AS_IF([test -z "$GM_MPIRUN"],
      [gm_mpi_summary="$gm_mpi_summary; no mpirun: MPI tests left out"])
    AC_DEFINE([GM_HAVE_MPI], [1], [Define to 1 to build gpumem.comm on MPI])
  ], [
    AS_IF([test "x$with_mpi" = xyes],
      [AC_MSG_ERROR([MPI was asked for (--with-mpi) but no working MPI was found (see config.log).
  Install Open MPI (apt-get install libopenmpi-dev openmpi-bin), give its
  flags (./configure MPI_CFLAGS=... MPI_LIBS=...), or build without it
  (--without-mpi)])])
    MPI_CFLAGS=
    MPI_LIBS=
    gm_mpi_summary="no (not found; gpumem.comm absent)"
  ])
])
# The mpirun that the extension module's tests run plain pythons under:
# GM_MPIRUN, else (a build without MPI, whose module runs jobs over
# mpi4py) MPIRUN or the mpirun on PATH; empty leaves those tests out.
GM_MPIRUN_MODULE=$GM_MPIRUN
AS_IF([test -z "$GM_MPIRUN_MODULE"], [
  AS_IF([test -n "$MPIRUN"], [GM_MPIRUN_MODULE=$MPIRUN],
    [GM_MPIRUN_MODULE=`command -v mpirun 2>/dev/null`])])
AM_CONDITIONAL([GM_HAVE_MPI], [test "x$gm_have_mpi" = xyes])
AC_SUBST([MPI_CFLAGS])
AC_SUBST([MPI_LIBS])
AC_SUBST([GM_MPIRUN])
AC_SUBST([GM_MPIRUN_MODULE])
])
