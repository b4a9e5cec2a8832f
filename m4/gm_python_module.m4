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
AC_SUBST([pyexecdir])
AC_SUBST([PYTHON_EXT_SUFFIX])
])
