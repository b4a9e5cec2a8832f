# gm_relocatable.m4 -- the installed tree finds itself where it is.
#
# GM_RELOCATABLE_DIRS
#   After GM_PYTHON_MODULE_DIRS.  A tree installed with a prefix other
#   than configure's (make install prefix=DIR, DESTDIR staging, a moved
#   folder) keeps its folders' places relative to one another.  So:
#   GM_PC_PREFIX, gpumem.pc's prefix, is ${pcfiledir}/.. for each folder
#   from the prefix to libdir/pkgconfig when libdir lies under the
#   prefix (else the configured prefix); GM_INCLUDE_FROM_BINDIR and
#   GM_INCLUDE_FROM_PYEXECDIR are includedir relative to bindir and to
#   pyexecdir, for gpumem.get_include (), empty where one of them does
#   not lie under the prefix.  The folders are compared as configure
#   has them, ${prefix} and ${exec_prefix} unexpanded.
AC_DEFUN([GM_RELOCATABLE_DIRS], [
gm_prefix=$prefix
test "x$gm_prefix" = xNONE && gm_prefix=$ac_default_prefix
# GM_UNDER_PREFIX(DIR): DIR's part below the prefix, or "-" when it is
# not below it.
gm_under_prefix () {
  gm_dir=$[1]
  case $gm_dir in
    '${exec_prefix}'/*)
      AS_IF([test "x$exec_prefix" = xNONE || test "x$exec_prefix" = 'x${prefix}'],
            [gm_dir=`echo "$gm_dir" | sed 's|^\${exec_prefix}/||'`], [gm_dir=-]) ;;
    '${prefix}'/*) gm_dir=`echo "$gm_dir" | sed 's|^\${prefix}/||'` ;;
    '${libdir}'/*)
      gm_dir=`gm_under_prefix "$libdir"`/`echo "$gm_dir" | sed 's|^\${libdir}/||'` ;;
    *) gm_dir=- ;;
  esac
  case $gm_dir in
    -*|*/-*|*'${'*|*..*) echo - ;;
    *) echo "$gm_dir" ;;
  esac
}
# GM_UP(PATH): "../" for each folder of PATH.
gm_up () {
  echo "$[1]" | sed -e 's|[[^/]][[^/]]*|..|g' -e 's|$|/|'
}
gm_lib=`gm_under_prefix "$libdir"`
gm_inc=`gm_under_prefix "$includedir"`
gm_bin=`gm_under_prefix "$bindir"`
gm_pyexec=`gm_under_prefix "$pyexecdir"`
AS_IF([test "x$gm_lib" != x-],
      [GM_PC_PREFIX='${pcfiledir}/'`gm_up "$gm_lib/pkgconfig" | sed 's|/$||'`],
      [GM_PC_PREFIX=$gm_prefix])
GM_INCLUDE_FROM_BINDIR=
GM_INCLUDE_FROM_PYEXECDIR=
AS_IF([test "x$gm_inc" != x- && test "x$gm_bin" != x-],
      [GM_INCLUDE_FROM_BINDIR=`gm_up "$gm_bin"`$gm_inc])
AS_IF([test "x$gm_inc" != x- && test "x$gm_pyexec" != x-],
      [GM_INCLUDE_FROM_PYEXECDIR=`gm_up "$gm_pyexec"`$gm_inc])
AC_SUBST([GM_PC_PREFIX])
AC_SUBST([GM_INCLUDE_FROM_BINDIR])
AC_SUBST([GM_INCLUDE_FROM_PYEXECDIR])
])
