# gm_python_module.m4 -- where the gpumem extension module is installed.
#
# GM_PYTHON_MODULE_DIRS
#   After GM_CHECK_PYTHON.  Substitutes pyexecdir, the configured
#   Python's folder for extension modules under ${exec_prefix} (its
#   'platlib' path in its default scheme; Debian's posix_local scheme
#   adds /local to the base /usr, which is dropped here, so that
#   --prefix=/usr/local gives the /usr/local/lib/pythonX.Y/dist-packages
#   that Debian's python reads), and PYTHON_EXT_SUFFIX, the
#   interpreter's file name ending for extension modules
#   (".cpython-311-x86_64-linux-gnu.so").  --with-pyexecdir=DIR, or
#   'make install pyexecdir=DIR', puts the module elsewhere.
#   --enable-abi3 compiles the Python layer against the limited API of
#   CPython 3.11 (GM_PYTHON_LIMITED_CPPFLAGS, substituted) and names the
#   module gpumem.abi3.so: one module for every CPython from 3.11 (the
#   binary wheel's build; docs/install.md).  Without it the module is
#   built for the configured Python alone.  3.11 is the floor: the
#   buffer protocol (Py_buffer), which every NumPy copy takes, enters
#   the limited API there.
#   Sets gm_pyexecdir_summary for configure's summary: the folder with
#   ${prefix} and ${exec_prefix} expanded, and whether the configured
#   Python searches it (else how a plain python3 finds the module).
AC_DEFUN([GM_PYTHON_MODULE_DIRS], [
AC_ARG_WITH([pyexecdir],
  [AS_HELP_STRING([--with-pyexecdir=DIR],
    [where to install the gpumem Python extension module (default: the configured Python's platlib under EPREFIX)])],
  [pyexecdir=$withval], [pyexecdir=])
AC_MSG_CHECKING([where to install the Python extension module])
AS_IF([test -z "$pyexecdir"], [
  pyexecdir=`"$PYTHON" -c '
import sysconfig
scheme = sysconfig.get_default_scheme() if hasattr(sysconfig, "get_default_scheme") else "posix_prefix"
path = sysconfig.get_path("platlib", scheme, vars={"platbase": "@PLATBASE@", "base": "@BASE@"})
if scheme == "posix_local":
    path = path.replace("@PLATBASE@/local", "@PLATBASE@", 1)
print(path.replace("@PLATBASE@", "@S|@{exec_prefix}").replace("@BASE@", "@S|@{prefix}"))'`
  AS_IF([test -z "$pyexecdir"],
        [pyexecdir='${exec_prefix}/lib/python'"$GM_PYTHON_VERSION"'/site-packages'])
])
AC_MSG_RESULT([$pyexecdir])
PYTHON_EXT_SUFFIX=`"$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX") or ".so")'`
AC_ARG_ENABLE([abi3],
  [AS_HELP_STRING([--enable-abi3],
    [build the extension module against the limited API (stable ABI) of CPython 3.11: one gpumem.abi3.so for every CPython from 3.11])],
  [], [enable_abi3=no])
GM_PYTHON_LIMITED_CPPFLAGS=
gm_abi3_summary=
AS_IF([test "x$enable_abi3" = xyes], [
  AS_IF(["$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'], [],
    [AC_MSG_ERROR([--enable-abi3 builds against CPython 3.11's limited API: PYTHON=$PYTHON is older (configure PYTHON=python3.11 or later)])])
  GM_PYTHON_LIMITED_CPPFLAGS="-DPy_LIMITED_API=0x030b0000"
  PYTHON_EXT_SUFFIX=.abi3.so
  gm_abi3_summary=" (limited API: CPython 3.11 and later)"
], [test "x$enable_abi3" != xno],
  [AC_MSG_ERROR([--enable-abi3 takes no value (got '$enable_abi3')])])
AC_SUBST([GM_PYTHON_LIMITED_CPPFLAGS])
AC_SUBST([pyexecdir])
AC_SUBST([PYTHON_EXT_SUFFIX])
gm_pyexecdir_expanded=`GM_EXPAND_DIR(["$pyexecdir"])`
AS_IF(["$PYTHON" -c '
import os, sys
d = os.path.realpath(sys.argv@<:@1@:>@)
sys.exit(0 if any(os.path.realpath(p) == d for p in sys.path if p) else 1)' \
  "$gm_pyexecdir_expanded" 2>/dev/null],
  [gm_pyexecdir_summary="$gm_pyexecdir_expanded
                     (on Python $GM_PYTHON_VERSION's sys.path)"],
  [gm_pyexecdir_summary="$gm_pyexecdir_expanded
                     (not on Python $GM_PYTHON_VERSION's sys.path: a plain python3
                     imports it with PYTHONPATH set to that folder; or see
                     'pip install .' in docs/install.md)"])
])

# GM_EXPAND_DIR(DIR)
#   Prints DIR, an installation folder as configure gives it
#   ('${exec_prefix}/lib'), with ${prefix}, ${exec_prefix} and the
#   folders made of them (${datarootdir}...) expanded as make install
#   would, the default prefix standing for an unset --prefix.
AC_DEFUN([GM_EXPAND_DIR], [(
  test "x$prefix" = xNONE && prefix=$ac_default_prefix
  test "x$exec_prefix" = xNONE && exec_prefix=$prefix
  gm_dir=$1
  while :; do
    case $gm_dir in
      *'${'*) eval "gm_dir=\"$gm_dir\"" ;;
      *) break ;;
    esac
  done
  echo "$gm_dir")])
