# gm_python.m4 -- find the Python to embed, and NumPy in it.
#
# GM_CHECK_PYTHON
#   Takes the interpreter named by PYTHON, else the first of python3,
#   python3.13 ... python3.9, python on PATH that can import numpy.  Stops
#   with advice when none can.  Sets and substitutes PYTHON_CFLAGS,
#   PYTHON_LIBS, GM_PYTHON_EXECUTABLE, GM_PYTHON_VERSION, GM_NUMPY_VERSION,
#   GM_NUMPY_INCLUDE (both "unchecked" under --disable-numpy-check:
#   nothing is compiled against NumPy, scripts need it at run time; pip's
#   build of the extension module alone, docs/install.md, runs in an
#   environment without it); defines GM_PYTHON_EXECUTABLE, the interpreter whose
#   environment (virtual environments included) the program uses at run
#   time, so that 'import numpy' finds the NumPy it was built against.
AC_DEFUN([GM_CHECK_PYTHON], [
AC_ARG_VAR([PYTHON], [the Python interpreter to embed (must have NumPy)])
AC_ARG_ENABLE([numpy-check],
  [AS_HELP_STRING([--disable-numpy-check],
    [accept a Python without NumPy (nothing is built against it; gpumem needs it at run time)])],
  [], [enable_numpy_check=yes])
gm_numpy_import=', numpy'
AS_IF([test "x$enable_numpy_check" = xno], [gm_numpy_import=])
gm_py_has_numpy () {
  "$[]1" -c "import sys$gm_numpy_import; sys.exit(0 if sys.version_info >= (3, 9) else 1)" >/dev/null 2>&1
}
AC_MSG_CHECKING([for a Python 3.9+ interpreter with NumPy])
gm_python=
AS_IF([test -n "$PYTHON"], [
  AS_IF([gm_py_has_numpy "$PYTHON"], [gm_python=$PYTHON], [
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([PYTHON=$PYTHON cannot 'import numpy' (or is older than 3.9).
  Install NumPy into it ($PYTHON -m pip install numpy), or name another
  interpreter: ./configure PYTHON=/path/to/python3])])
], [
  for gm_cand in python3 python3.13 python3.12 python3.11 python3.10 python3.9 python; do
    gm_path=`command -v $gm_cand 2>/dev/null` || continue
    AS_IF([gm_py_has_numpy "$gm_path"], [gm_python=$gm_path; break])
  done
  AS_IF([test -z "$gm_python"], [
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([no Python 3 interpreter on PATH can 'import numpy'.
  gpumem embeds Python and its scripts use NumPy.  Either install NumPy:
      apt-get install python3-dev python3-numpy      (Debian, Ubuntu)
      python3 -m pip install numpy                   (any Python 3.9+)
  or name the interpreter that has it:
      ./configure PYTHON=/path/to/venv/bin/python3])])
])
dnl sys.executable keeps a virtual environment's own path: that is what
dnl the embedded interpreter needs to find the environment's packages.
GM_PYTHON_EXECUTABLE=`"$gm_python" -c 'import sys; print(sys.executable)'`
AC_MSG_RESULT([$GM_PYTHON_EXECUTABLE])
PYTHON=$gm_python

gm_pyvar () {
  "$PYTHON" -c "import sysconfig; v = sysconfig.get_config_var('$[]1'); print(v if v is not None else '')"
}
GM_PYTHON_VERSION=`"$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info@<:@:2@:>@)'`
gm_py_include=`"$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()@<:@"include"@:>@)'`
gm_py_libdir=`gm_pyvar LIBDIR`
gm_py_ldversion=`gm_pyvar LDVERSION`
gm_py_syslibs="`gm_pyvar LIBS` `gm_pyvar SYSLIBS`"
AS_IF([test "x$enable_numpy_check" = xno], [
  GM_NUMPY_VERSION=unchecked
  GM_NUMPY_INCLUDE=unchecked
], [
  GM_NUMPY_VERSION=`"$PYTHON" -c 'import numpy; print(numpy.__version__)'`
  GM_NUMPY_INCLUDE=`"$PYTHON" -c 'import numpy; print(numpy.get_include())'`
])

PYTHON_CFLAGS="-I$gm_py_include"
PYTHON_LIBS="-L$gm_py_libdir -Wl,-rpath,$gm_py_libdir -lpython$gm_py_ldversion $gm_py_syslibs"

AC_MSG_CHECKING([whether Python $GM_PYTHON_VERSION can be embedded])
gm_save_CPPFLAGS=$CPPFLAGS
gm_save_LIBS=$LIBS
CPPFLAGS="$PYTHON_CFLAGS $CPPFLAGS"
LIBS="$PYTHON_LIBS $LIBS"
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#define PY_SSIZE_T_CLEAN
#include <Python.h>]], [[
  PyConfig config;
  PyConfig_InitPythonConfig (&config);
  PyStatus status = Py_InitializeFromConfig (&config);
  PyConfig_Clear (&config);
  return PyStatus_Exception (status);]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([cannot compile and link against Python $GM_PYTHON_VERSION's C API
  (headers in $gm_py_include, library -lpython$gm_py_ldversion in $gm_py_libdir).
  Install its development files (apt-get install python3-dev), or pick an
  interpreter built with a shared libpython: ./configure PYTHON=...])])
CPPFLAGS=$gm_save_CPPFLAGS
LIBS=$gm_save_LIBS

AC_DEFINE_UNQUOTED([GM_PYTHON_EXECUTABLE], ["$GM_PYTHON_EXECUTABLE"],
  [The Python interpreter whose environment the program uses by default])
AC_DEFINE_UNQUOTED([GM_PYTHON_VERSION_TEXT], ["$GM_PYTHON_VERSION"],
  [The Python version the program embeds])
AC_SUBST([PYTHON_CFLAGS])
AC_SUBST([PYTHON_LIBS])
AC_SUBST([GM_PYTHON_EXECUTABLE])
AC_SUBST([GM_PYTHON_VERSION])
AC_SUBST([GM_NUMPY_VERSION])
AC_SUBST([GM_NUMPY_INCLUDE])
])
