# gm_fuzzer.m4 -- libFuzzer targets for the C code that parses input.
#
# GM_CHECK_FUZZER
#   The targets in tests/fuzz/fuzz-*.c are built by FUZZ_CC (default: the
#   first clang on PATH) with FUZZ_FLAGS, -fsanitize=fuzzer plus
#   AddressSanitizer and UndefinedBehaviorSanitizer, when that compiler
#   links such a program; make check then runs each briefly.  The rest of
#   gpumem keeps the C compiler configure chose.  --disable-fuzzers skips
#   them; --enable-fuzzers stops when they cannot be built.
#   Substitutes FUZZ_CC, FUZZ_FLAGS and GM_FUZZERS_ENABLE (yes, no or
#   check: what configure was asked); sets the conditional
#   GM_HAVE_FUZZER.
AC_DEFUN([GM_CHECK_FUZZER], [
AC_ARG_ENABLE([fuzzers],
  [AS_HELP_STRING([--disable-fuzzers],
    [do not build the libFuzzer targets (default: build them where clang -fsanitize=fuzzer works)])],
  [], [enable_fuzzers=check])
AC_ARG_VAR([FUZZ_CC], [compiler of the libFuzzer targets (default: clang)])

gm_have_fuzzer=no
FUZZ_FLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
AS_IF([test "x$enable_fuzzers" != xno], [
  AS_IF([test -z "$FUZZ_CC"], [AC_PATH_PROG([FUZZ_CC], [clang])])
  AS_IF([test -n "$FUZZ_CC"], [
    AC_MSG_CHECKING([whether $FUZZ_CC builds a libFuzzer target])
    cat > conftest-fuzz.c <<GM_EOF
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  return size > 0 && data[[0]] == 0;
}
GM_EOF
    AS_IF([$FUZZ_CC $FUZZ_FLAGS -o conftest-fuzz conftest-fuzz.c >&AS_MESSAGE_LOG_FD 2>&1],
          [gm_have_fuzzer=yes])
    rm -f conftest-fuzz conftest-fuzz.c
    AC_MSG_RESULT([$gm_have_fuzzer])
  ])
  AS_IF([test "x$enable_fuzzers" = xyes && test $gm_have_fuzzer = no],
        [AC_MSG_ERROR([--enable-fuzzers: no compiler builds a libFuzzer target; install clang and its runtime (Debian: clang libclang-rt-14-dev) or give FUZZ_CC=])])
])
AS_IF([test $gm_have_fuzzer = yes],
      [gm_fuzzer_summary="yes ($FUZZ_CC)"],
      [gm_fuzzer_summary="no (tests/fuzz C targets skipped)"])
AC_SUBST([FUZZ_FLAGS])
dnl How configure was asked (yes, no or check), for the skip's message.
GM_FUZZERS_ENABLE=$enable_fuzzers
AC_SUBST([GM_FUZZERS_ENABLE])
AM_CONDITIONAL([GM_HAVE_FUZZER], [test $gm_have_fuzzer = yes])
])
