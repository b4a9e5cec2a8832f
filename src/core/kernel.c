/* kernel.c -- reading the kernel registry: lookup, signatures, and the
   minimum-length expressions every call is checked against.  */

#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gm.h"

const gm_kernel *
gm_kernel_find (const char *name)
{
  for (int k = 0; k < gm_kernel_count; k++)
    if (strcmp (gm_kernel_table[k].name, name) == 0)
      return &gm_kernel_table[k];
  return NULL;
}

void
gm_kernel_param_format (const gm_kernel_param *param, char *buf, size_t size)
{
  static const char *const direction[] = {
    [GM_PARAM_IN] = "in", [GM_PARAM_OUT] = "out", [GM_PARAM_INOUT] = "inout"
  };

  if (param->kind == GM_PARAM_SCALAR)
    snprintf (buf, size, "%s: %s", param->name, gm_dtypes[param->dtype].name);
  else
    snprintf (buf, size, "%s: %s[%s] %s", param->name,
              gm_dtypes[param->dtype].name, param->length,
              direction[param->kind]);
}

/* A recursive-descent evaluator over int64 with overflow checks:
     expr   := term (('+' | '-') term)*
     term   := factor (('*' | '/' | '%') factor)*
     factor := NUMBER | NAME | '(' expr ')' | '-' factor  */
typedef struct parser
{
  const char *text;
  const char *pos;
  const gm_kernel *kernel;
  const gm_arg *args;
  int depth;
} parser;

#define MAX_DEPTH 64

static gm_status expr (parser *p, int64_t *value);

static gm_status
fail (parser *p, const char *what)
{
  return gm_error_set (GM_ERR_VALUE, 0, NULL,
                       "kernel %s: length expression \"%s\": %s at "
                       "offset %d", p->kernel->name, p->text, what,
                       (int) (p->pos - p->text));
}

static void
skip_space (parser *p)
{
  while (*p->pos == ' ' || *p->pos == '\t')
    p->pos++;
}

static gm_status
scalar_value (parser *p, const char *name, size_t len, int64_t *value)
{
  for (int i = 0; i < p->kernel->nparams; i++)
    {
      const gm_kernel_param *param = &p->kernel->params[i];
      if (strlen (param->name) != len || memcmp (param->name, name, len) != 0)
        continue;
      if (param->kind != GM_PARAM_SCALAR
          || (gm_dtypes[param->dtype].kind != 'i'
              && gm_dtypes[param->dtype].kind != 'u'))
        return fail (p, "names a parameter that is not an integer scalar");
      if (p->args == NULL)
        *value = 0;
      else
        switch (param->dtype)
          {
          case GM_INT8: *value = p->args[i].i8; break;
          case GM_INT16: *value = p->args[i].i16; break;
          case GM_INT32: *value = p->args[i].i32; break;
          case GM_INT64: *value = p->args[i].i64; break;
          case GM_UINT8: *value = p->args[i].u8; break;
          case GM_UINT16: *value = p->args[i].u16; break;
          case GM_UINT32: *value = p->args[i].u32; break;
          default:
            if (p->args[i].u64 > (uint64_t) INT64_MAX)
              return fail (p, "scalar too large");
            *value = (int64_t) p->args[i].u64;
            break;
          }
      return GM_OK;
    }
  return fail (p, "names no parameter of the kernel");
}

static gm_status
factor (parser *p, int64_t *value)
{
  gm_status status;

  skip_space (p);
  if (++p->depth > MAX_DEPTH)
    return fail (p, "nested too deeply");
  if (*p->pos == '(')
    {
      p->pos++;
      status = expr (p, value);
      if (status != GM_OK)
        return status;
      skip_space (p);
      if (*p->pos != ')')
        return fail (p, "')' expected");
      p->pos++;
    }
  else if (*p->pos == '-')
    {
      p->pos++;
      status = factor (p, value);
      if (status != GM_OK)
        return status;
      if (*value == INT64_MIN)
        return fail (p, "overflow");
      *value = -*value;
    }
  else if (isdigit ((unsigned char) *p->pos))
    {
      int64_t n = 0;
      while (isdigit ((unsigned char) *p->pos))
        {
          if (__builtin_mul_overflow (n, 10, &n)
              || __builtin_add_overflow (n, *p->pos - '0', &n))
            return fail (p, "number too large");
          p->pos++;
        }
      *value = n;
    }
  else if (isalpha ((unsigned char) *p->pos) || *p->pos == '_')
    {
      const char *start = p->pos;
      while (isalnum ((unsigned char) *p->pos) || *p->pos == '_')
        p->pos++;
      status = scalar_value (p, start, (size_t) (p->pos - start), value);
      if (status != GM_OK)
        return status;
    }
  else
    return fail (p, *p->pos ? "unexpected character" : "unexpected end");
  p->depth--;
  return GM_OK;
}

/* *VALUE OP RHS into *VALUE, refusing overflow and, when evaluating
   (P->args set; a check alone does not divide), division by zero.  */
static gm_status
apply (parser *p, char op, int64_t rhs, int64_t *value)
{
  bool overflow = false;

  switch (op)
    {
    case '+':
      overflow = __builtin_add_overflow (*value, rhs, value);
      break;
    case '-':
      overflow = __builtin_sub_overflow (*value, rhs, value);
      break;
    case '*':
      overflow = __builtin_mul_overflow (*value, rhs, value);
      break;
    default:
      if (p->args == NULL)
        break;
      if (rhs == 0)
        return fail (p, "division by zero");
      overflow = *value == INT64_MIN && rhs == -1;
      if (!overflow)
        *value = op == '/' ? *value / rhs : *value % rhs;
      break;
    }
  return overflow ? fail (p, "overflow") : GM_OK;
}

/* OPERAND (OP OPERAND)*, OP one of OPS, left to right: the one walker of
   both levels of the grammar (term and expr).  */
static gm_status
chain (parser *p, const char *ops,
       gm_status (*operand) (parser *, int64_t *), int64_t *value)
{
  gm_status status = operand (p, value);

  while (status == GM_OK)
    {
      int64_t rhs;
      char op;
      skip_space (p);
      op = *p->pos;
      if (op == '\0' || strchr (ops, op) == NULL)
        break;
      p->pos++;
      status = operand (p, &rhs);
      if (status == GM_OK)
        status = apply (p, op, rhs, value);
    }
  return status;
}

static gm_status
term (parser *p, int64_t *value)
{
  return chain (p, "*/%", factor, value);
}

static gm_status
expr (parser *p, int64_t *value)
{
  return chain (p, "+-", term, value);
}

gm_status
gm_kernel_eval_length (const gm_kernel *kernel, const char *text,
                       const gm_arg *args, int64_t *value)
{
  parser p = {text ? text : "", text ? text : "", kernel, args, 0};
  gm_status status;

  *value = 0;
  if (text == NULL)
    return fail (&p, "missing");
  status = expr (&p, value);
  if (status != GM_OK)
    return status;
  skip_space (&p);
  if (*p.pos != '\0')
    return fail (&p, "unexpected text");
  if (args == NULL)
    *value = 0;
  return GM_OK;
}
