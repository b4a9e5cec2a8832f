/* fuzz-length.c -- libFuzzer target: the kernel registry's minimum-length
   expressions (gm_kernel_eval_length in src/core/kernel.c).

   Input: 3 x 8 bytes, the values of the fake kernel's integer scalars
   (n: int64, m: uint64, k: int8), then the expression text (up to the
   first NUL).  The result is checked against a reference evaluator
   written here over __int128, so a wrong value, a missed overflow or
   division by zero, or an accepted malformed expression fails as loudly
   as a crash.  Built with -fsanitize=fuzzer,address,undefined; see
   Makefile.am (fuzz targets) and tests/fuzz/run-fuzzers.sh.  */

/* strnlen: POSIX, not C11.  */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"

/* The fake kernel: integer scalars the expressions may name, a float
   scalar and an array they may not.  */
static const gm_kernel fake_kernel = {
  "fake", "a kernel for fuzzing length expressions", 5,
  {
    {"n", GM_PARAM_SCALAR, GM_INT64, NULL},
    {"m", GM_PARAM_SCALAR, GM_UINT64, NULL},
    {"k", GM_PARAM_SCALAR, GM_INT8, NULL},
    {"alpha", GM_PARAM_SCALAR, GM_FLOAT32, NULL},
    {"x", GM_PARAM_IN, GM_FLOAT32, "n"},
  },
  NULL, NULL
};

/* kernel.c's gm_kernel_find reads the registry: here, the fake kernel.  */
const gm_kernel gm_kernel_table[] = {
  {"fake", "", 0, {{NULL, 0, 0, NULL}}, NULL, NULL}
};
const int gm_kernel_count = 1;

/* The reference: the grammar of kernel.c, evaluated over __int128; any
   value outside int64 is an overflow, as is a number literal that does
   not fit.  */
typedef struct ref
{
  const char *pos;
  const gm_arg *args;
  int depth;
  bool fail;
} ref;

static __int128 ref_expr (ref *r);

static bool
out_of_range (__int128 v)
{
  return v > INT64_MAX || v < INT64_MIN;
}

static void
ref_space (ref *r)
{
  while (*r->pos == ' ' || *r->pos == '\t')
    r->pos++;
}

static __int128
ref_factor (ref *r)
{
  __int128 v = 0;

  ref_space (r);
  if (++r->depth > 64)
    {
      r->fail = true;
      return 0;
    }
  if (*r->pos == '(')
    {
      r->pos++;
      v = ref_expr (r);
      if (r->fail)
        return 0;
      ref_space (r);
      if (*r->pos != ')')
        {
          r->fail = true;
          return 0;
        }
      r->pos++;
    }
  else if (*r->pos == '-')
    {
      r->pos++;
      v = -ref_factor (r);
    }
  else if (isdigit ((unsigned char) *r->pos))
    {
      while (isdigit ((unsigned char) *r->pos))
        {
          v = v * 10 + (*r->pos++ - '0');
          if (out_of_range (v))
            {
              r->fail = true;
              return 0;
            }
        }
    }
  else if (isalpha ((unsigned char) *r->pos) || *r->pos == '_')
    {
      const char *start = r->pos;
      size_t len;
      while (isalnum ((unsigned char) *r->pos) || *r->pos == '_')
        r->pos++;
      len = (size_t) (r->pos - start);
      if (len == 1 && *start == 'n')
        v = r->args ? r->args[0].i64 : 0;
      else if (len == 1 && *start == 'm')
        {
          if (r->args && r->args[1].u64 > (uint64_t) INT64_MAX)
            r->fail = true;
          v = r->args ? (__int128) r->args[1].u64 : 0;
        }
      else if (len == 1 && *start == 'k')
        v = r->args ? r->args[2].i8 : 0;
      else
        r->fail = true;
    }
  else
    r->fail = true;
  if (out_of_range (v))
    r->fail = true;
  r->depth--;
  return r->fail ? 0 : v;
}

static __int128
ref_term (ref *r)
{
  __int128 v = ref_factor (r);

  while (!r->fail)
    {
      char op;
      __int128 rhs;
      ref_space (r);
      op = *r->pos;
      if (op != '*' && op != '/' && op != '%')
        break;
      r->pos++;
      rhs = ref_factor (r);
      if (r->fail)
        break;
      if (op == '*')
        v *= rhs;
      else if (r->args != NULL)
        {
          /* INT64_MIN % -1 is 0, but undefined in C: both refuse it.  */
          if (rhs == 0 || (v == INT64_MIN && rhs == -1))
            r->fail = true;
          else
            v = op == '/' ? v / rhs : v % rhs;
        }
      if (out_of_range (v))
        r->fail = true;
    }
  return v;
}

static __int128
ref_expr (ref *r)
{
  __int128 v = ref_term (r);

  while (!r->fail)
    {
      char op;
      __int128 rhs;
      ref_space (r);
      op = *r->pos;
      if (op != '+' && op != '-')
        break;
      r->pos++;
      rhs = ref_term (r);
      if (r->fail)
        break;
      v = op == '+' ? v + rhs : v - rhs;
      if (out_of_range (v))
        r->fail = true;
    }
  return v;
}

/* The reference's verdict on TEXT: true and *VALUE, or false.  */
static bool
ref_eval (const char *text, const gm_arg *args, int64_t *value)
{
  ref r = {text, args, 0, false};
  __int128 v = ref_expr (&r);

  if (!r.fail)
    {
      ref_space (&r);
      if (*r.pos != '\0')
        r.fail = true;
    }
  *value = r.fail || args == NULL ? 0 : (int64_t) v;
  return !r.fail;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  gm_arg args[5];
  char *text;
  char buf[64];
  int64_t value, want;
  gm_status status, status_null;
  bool ok;

  if (size < 24)
    return 0;
  memset (args, 0, sizeof args);
  memcpy (&args[0].i64, data, 8);
  memcpy (&args[1].u64, data + 8, 8);
  memcpy (&args[2].i8, data + 16, 1);
  args[3].f32 = 1.5f;
  text = malloc (size - 24 + 1);
  if (text == NULL)
    return 0;
  memcpy (text, data + 24, size - 24);
  text[size - 24] = '\0';

  status = gm_kernel_eval_length (&fake_kernel, text, args, &value);
  status_null = gm_kernel_eval_length (&fake_kernel, text, NULL, &value);
  if (status_null != GM_OK && status_null != GM_ERR_VALUE)
    abort ();
  if (status_null == GM_OK && value != 0)
    abort ();                  /* without arguments the value is 0 */
  /* What fails for its syntax or names fails whatever the values.  */
  if (status_null != GM_OK && status == GM_OK)
    abort ();

  status = gm_kernel_eval_length (&fake_kernel, text, args, &value);
  ok = ref_eval (text, args, &want);
  if ((status == GM_OK) != ok)
    {
      fprintf (stderr, "verdicts differ on \"%s\": kernel.c %d (%s), "
               "reference %d\n", text, status, gm_last_error ()->message,
               ok);
      abort ();
    }
  if (ok && value != want)
    {
      fprintf (stderr, "values differ on \"%s\": %lld, reference %lld\n",
               text, (long long) value, (long long) want);
      abort ();
    }
  if (status != GM_OK)
    {
      /* The message is whole, a C string, and names the kernel.  */
      const char *message = gm_last_error ()->message;
      if (strnlen (message, GM_ERROR_MESSAGE_MAX) == GM_ERROR_MESSAGE_MAX
          || strncmp (message, "kernel fake:", 12) != 0)
        abort ();
    }

  /* The other readers of the registry, with the text as a name.  */
  if (gm_kernel_find (text) != NULL && strcmp (text, "fake") != 0)
    abort ();
  for (int i = 0; i < fake_kernel.nparams; i++)
    gm_kernel_param_format (&fake_kernel.params[i], buf,
                            1 + (size_t) data[17 + i % 7] % sizeof buf);
  free (text);
  return 0;
}
