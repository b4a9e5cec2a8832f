# gm_sanitizers.m4 -- optional AddressSanitizer and UBSan builds.
#
# GM_ENABLE_SANITIZERS
#   --enable-sanitizers adds -fsanitize=address,undefined to CFLAGS and
#   LDFLAGS (tests then run with the sanitizers' runtime checks).
#   Substitutes GM_SANITIZERS (yes or no).
AC_DEFUN([GM_ENABLE_SANITIZERS], [
AC_ARG_ENABLE([sanitizers],
  [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
  [], [enable_sanitizers=no])
AS_IF([test "x$enable_sanitizers" = xyes], [
  GM_SANITIZE_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  CFLAGS="$CFLAGS $GM_SANITIZE_FLAGS"
  LDFLAGS="$LDFLAGS $GM_SANITIZE_FLAGS"
])
AM_CONDITIONAL([GM_SANITIZERS], [test "x$enable_sanitizers" = xyes])
AC_SUBST([GM_SANITIZERS], [$enable_sanitizers])
])
