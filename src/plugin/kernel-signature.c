/* kernel-signature.c -- reading a kernel's signature from text, for
   kernels that are not compiled into gpumem: plugins (plugin.c), the
   embedding program's (embed.c) and JIT kernels (jit.c).

   The notation (gpumem/kernel.h and gpumem-kernels(7)):

     signature := [param (',' param)*]
     param     := DTYPE NAME                                   a scalar
                | [in|out|inout] [const] DTYPE '*' NAME '[' LENGTH ']'

   An array without a direction is inout, or in when const.  LENGTH is
   a minimum-length expression as in kernels/kernels.def, checked here
   as gm_kernel_eval_length reads it.  */

/* strnlen.  */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "kernel-signature.h"

typedef struct reader
{
  const char *text;      /* the whole signature, for messages */
  char *pos;             /* in the writable copy */
  char *copy;
  const char *kernel;
} reader;

static gm_status
fail (const reader *r, const char *what, const char *word)
{
  return gm_error_set (GM_ERR_VALUE, 0, NULL,
                       "kernel '%s': signature \"%s\": %s%s%s%s at offset "
                       "%d", r->kernel, r->text, what, word ? " '" : "",
                       word ? word : "", word ? "'" : "",
                       (int) (r->pos - r->copy));
}

static void
skip_space (reader *r)
{
  while (isspace ((unsigned char) *r->pos))
    r->pos++;
}

/* Reads an identifier at R->pos into *WORD (NUL-terminated in the copy
   once the caller calls end_word), its length in *LEN; 0 if none.  */
static size_t
word_at (reader *r, char **word)
{
  char *start;

  skip_space (r);
  start = r->pos;
  if (!isalpha ((unsigned char) *start) && *start != '_')
    return 0;
  while (isalnum ((unsigned char) *r->pos) || *r->pos == '_')
    r->pos++;
  *word = start;
  return (size_t) (r->pos - start);
}

static bool
word_is (const char *word, size_t len, const char *what)
{
  return strlen (what) == len && memcmp (word, what, len) == 0;
}

/* Names a call cannot take as a parameter: the launch options.  */
static bool
reserved (const char *name)
{
  return strcmp (name, "grid") == 0 || strcmp (name, "block") == 0
         || strcmp (name, "stream") == 0;
}

gm_status
gm_kernel_signature_parse (gm_kernel *kernel, const char *text,
                           char **storage)
{
  reader r = {text ? text : "", NULL, NULL, kernel->name};
  /* Each name is cut out of the copy by writing a NUL after it, which
     may overwrite the next token's first character: keep it here.  */
  gm_status status = GM_OK;
  int n = 0;

  *storage = NULL;
  kernel->nparams = 0;
  if (text == NULL)
    {
      r.copy = r.pos = (char *) "";
      return fail (&r, "missing", NULL);
    }
  r.copy = malloc (strlen (text) + 2);
  if (r.copy == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of host memory");
  strcpy (r.copy, text);
  r.pos = r.copy;

  skip_space (&r);
  while (*r.pos != '\0')
    {
      gm_kernel_param *param;
      char *word, *name, *length = NULL;
      size_t len, name_len;
      int direction = -1, dtype;
      bool is_const = false, pointer = false;

      if (n == GM_MAX_KERNEL_PARAMS)
        {
          status = fail (&r, "more than 16 parameters", NULL);
          goto done;
        }
      len = word_at (&r, &word);
      if (len == 0)
        {
          status = fail (&r, "a parameter expected", NULL);
          goto done;
        }
      if (word_is (word, len, "in") || word_is (word, len, "out")
          || word_is (word, len, "inout"))
        {
          direction = word_is (word, len, "in") ? GM_PARAM_IN
                      : word_is (word, len, "out") ? GM_PARAM_OUT
                                                   : GM_PARAM_INOUT;
          len = word_at (&r, &word);
        }
      if (len != 0 && word_is (word, len, "const"))
        {
          is_const = true;
          len = word_at (&r, &word);
        }
      if (len == 0)
        {
          status = fail (&r, "a dtype expected", NULL);
          goto done;
        }
      dtype = gm_dtype_from_name (word, len);
      if (dtype < 0)
        {
          char saved = word[len];
          word[len] = '\0';
          r.pos = word;
          status = fail (&r, "unknown dtype", word);
          word[len] = saved;
          goto done;
        }
      skip_space (&r);
      if (*r.pos == '*')
        {
          pointer = true;
          r.pos++;
        }
      name_len = word_at (&r, &name);
      if (name_len == 0)
        {
          status = fail (&r, "a parameter name expected", NULL);
          goto done;
        }
      skip_space (&r);
      if (pointer)
        {
          int depth = 0;
          if (*r.pos != '[')
            {
              status = fail (&r, "'[' and a minimum length expected after "
                             "the array", NULL);
              goto done;
            }
          length = ++r.pos;
          while (*r.pos != '\0' && (*r.pos != ']' || depth > 0))
            {
              depth += *r.pos == '(' ? 1 : *r.pos == ')' ? -1 : 0;
              r.pos++;
            }
          if (*r.pos != ']')
            {
              status = fail (&r, "']' expected", NULL);
              goto done;
            }
          *r.pos++ = '\0';
          if (is_const && direction != -1 && direction != GM_PARAM_IN)
            {
              status = fail (&r, "a const array is read only: its "
                             "direction must be in", NULL);
              goto done;
            }
          if (direction == -1)
            direction = is_const ? GM_PARAM_IN : GM_PARAM_INOUT;
        }
      else
        {
          if (direction != -1 || is_const)
            {
              status = fail (&r, "a scalar takes no direction or const "
                             "(arrays are written DTYPE *NAME[LENGTH])",
                             NULL);
              goto done;
            }
          if (gm_dtypes[dtype].kind == 'b' || gm_dtypes[dtype].kind == 'c'
              || dtype == GM_FLOAT16)
            {
              status = fail (&r, "a scalar must be an integer, float32 or "
                             "float64, not", gm_dtypes[dtype].name);
              goto done;
            }
          direction = GM_PARAM_SCALAR;
        }

      skip_space (&r);
      if (*r.pos != ',' && *r.pos != '\0')
        {
          status = fail (&r, "',' expected", NULL);
          goto done;
        }
      if (*r.pos == ',')
        {
          *r.pos++ = '\0';
          skip_space (&r);
          if (*r.pos == '\0')
            {
              status = fail (&r, "a parameter expected after ','", NULL);
              goto done;
            }
        }
      /* The name ends where the text after it began; that is a space,
         '[', ',' or the end, all consumed by now.  */
      name[name_len] = '\0';
      param = &kernel->params[n];
      param->name = name;
      param->kind = (gm_param_kind) direction;
      param->dtype = (gm_dtype) dtype;
      param->length = length;
      for (int i = 0; i < n; i++)
        if (strcmp (kernel->params[i].name, name) == 0)
          {
            status = fail (&r, "two parameters named", name);
            goto done;
          }
      if (reserved (name))
        {
          status = fail (&r, "a parameter may not be named", name);
          goto done;
        }
      n++;
    }
  kernel->nparams = n;

  /* The length expressions, once every scalar's name is known.  */
  for (int i = 0; i < n; i++)
    if (kernel->params[i].kind != GM_PARAM_SCALAR)
      {
        int64_t unused;
        status = gm_kernel_eval_length (kernel, kernel->params[i].length,
                                        NULL, &unused);
        if (status != GM_OK)
          goto done;
      }

done:
  if (status != GM_OK)
    {
      kernel->nparams = 0;
      free (r.copy);
      return status;
    }
  *storage = r.copy;
  return GM_OK;
}

int
gm_kernel_signature_format (const gm_kernel *kernel, char *buf, size_t size)
{
  static const char *const kinds[] = {"in ", "out ", "inout ", ""};
  size_t used = 0;

  if (size > 0)
    buf[0] = '\0';
  for (int i = 0; i < kernel->nparams; i++)
    {
      const gm_kernel_param *param = &kernel->params[i];
      int n = snprintf (buf + used, size - used, "%s%s%s %s%s", i ? "," : "",
                        kinds[param->kind], gm_dtypes[param->dtype].name,
                        param->length ? "*" : "", param->name);
      if (n < 0 || (size_t) n >= size - used)
        return -1;
      used += (size_t) n;
      if (param->length != NULL)
        {
          if (used + strlen (param->length) + 3 > size)
            return -1;
          buf[used++] = '[';
          for (const char *c = param->length; *c != '\0'; c++)
            if (!isspace ((unsigned char) *c))
              buf[used++] = *c;
          buf[used++] = ']';
          buf[used] = '\0';
        }
    }
  return 0;
}

/* Checking a signature against a kernel's lowered name.

   A C++ kernel's lowered name is its Itanium-ABI mangled name, which
   spells each parameter's type: "_Z5scalexfPf" is scale (long long,
   float, float *).  What is read of it: a function name, plain,
   namespaced (N...E) or of internal linkage (L), with template
   arguments (I...E, then the return type); parameter types of the
   builtin integers, floats and bool, __half, float2 and double2 (as
   float16, complex64, complex128), pointers (P) with const, volatile
   and restrict qualifiers (K, V, r), template parameters (T_) and
   substitutions (S_) of these.  A type outside this list is still
   counted (its parameter's dtype is not checked); a name that cannot
   be read at all checks nothing.  */

/* What a parameter type is known to be.  */
typedef struct mangled_type
{
  int pointers;          /* levels of pointer */
  int dtype;             /* the innermost type's dtype, or -1 unknown */
  bool is_const;         /* the pointee (for a pointer) is const */
  bool is_void;
} mangled_type;

/* Types nest no deeper than MAX_DEPTH here (a name nesting deeper is
   not read), so that a hostile name cannot exhaust the stack.  */
enum { MAX_SUBS = 64, MAX_TARGS = 16, MAX_DEPTH = 32 };

typedef struct demangler
{
  const char *p;
  int depth;
  mangled_type subs[MAX_SUBS];
  int nsubs;
  mangled_type targs[MAX_TARGS];
  int ntargs;
} demangler;

static const mangled_type unknown_type = {0, -1, false, false};

static void
add_sub (demangler *d, mangled_type t)
{
  if (d->nsubs < MAX_SUBS)
    d->subs[d->nsubs] = t;
  d->nsubs++;
}

/* Reads a number in base BASE (10 or 36, digits and capital letters)
   ending at '_' for 36; -1 when there is none.  */
static long
read_number (demangler *d, int base)
{
  long v = 0;
  int n = 0;

  for (;; n++, d->p++)
    {
      int c = (unsigned char) *d->p, digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (base == 36 && c >= 'A' && c <= 'Z')
        digit = c - 'A' + 10;
      else
        break;
      if (v > 100000)
        return -1;
      v = v * base + digit;
    }
  return n == 0 ? -1 : v;
}

/* A <seq-id>_ after S or T: its index (S_ and T_ are 0, S0_ 1...).  */
static long
read_seq_id (demangler *d)
{
  long v = 0;

  if (*d->p != '_')
    {
      v = read_number (d, 36);
      if (v < 0)
        return -1;
      v++;
    }
  if (*d->p != '_')
    return -1;
  d->p++;
  return v;
}

/* Reads a source-name (length and identifier) into NAME (NUL-ended,
   cut to SIZE).  0, or -1.  */
static int
read_source_name (demangler *d, char *name, size_t size)
{
  long len = read_number (d, 10);

  if (len <= 0 || (long) strnlen (d->p, (size_t) len) < len)
    return -1;
  snprintf (name, size, "%.*s", (int) len, d->p);
  d->p += len;
  return 0;
}

static int
builtin_dtype (char c, bool *is_void)
{
  *is_void = false;
  switch (c)
    {
    case 'b': return GM_BOOL;
    case 'c': case 'a': return GM_INT8;
    case 'h': return GM_UINT8;
    case 's': return GM_INT16;
    case 't': return GM_UINT16;
    case 'i': return GM_INT32;
    case 'j': return GM_UINT32;
    case 'l': case 'x': return sizeof (long) == 8 || c == 'x'
                               ? GM_INT64 : GM_INT32;
    case 'm': case 'y': return sizeof (long) == 8 || c == 'y'
                               ? GM_UINT64 : GM_UINT32;
    case 'f': return GM_FLOAT32;
    case 'd': return GM_FLOAT64;
    case 'v': *is_void = true; return -1;
    default: return -2;
    }
}

static int read_type (demangler *d, mangled_type *t);

/* Reads template arguments after 'I' up to and past 'E' into D's
   targs.  0, or -1.  */
static int
read_template_args (demangler *d)
{
  d->ntargs = 0;
  while (*d->p != 'E')
    {
      mangled_type t = unknown_type;
      if (*d->p == '\0')
        return -1;
      if (*d->p == 'L')
        {
          /* A value: L type number E.  */
          const char *end = strchr (d->p, 'E');
          if (end == NULL)
            return -1;
          d->p = end + 1;
        }
      else if (read_type (d, &t) != 0)
        return -1;
      if (d->ntargs < MAX_TARGS)
        d->targs[d->ntargs] = t;
      d->ntargs++;
    }
  d->p++;
  return 0;
}

static int read_type_at (demangler *d, mangled_type *t);

static int
read_type (demangler *d, mangled_type *t)
{
  int result;

  if (d->depth >= MAX_DEPTH)
    return -1;
  d->depth++;
  result = read_type_at (d, t);
  d->depth--;
  return result;
}

static int
read_type_at (demangler *d, mangled_type *t)
{
  char c = *d->p, name[64];
  bool is_void;
  int dtype;
  long id;

  *t = unknown_type;
  if (c == 'P')
    {
      d->p++;
      if (read_type (d, t) != 0)
        return -1;
      if (t->pointers > 0)
        t->is_const = false;
      t->pointers++;
      add_sub (d, *t);
      return 0;
    }
  if (c == 'K' || c == 'V' || c == 'r')
    {
      bool is_const = false;
      while (*d->p == 'r' || *d->p == 'V' || *d->p == 'K')
        is_const |= *d->p++ == 'K';
      if (read_type (d, t) != 0)
        return -1;
      t->is_const = is_const;
      add_sub (d, *t);
      return 0;
    }
  if (c == 'S')
    {
      d->p++;
      id = read_seq_id (d);
      if (id < 0 || id >= d->nsubs || id >= MAX_SUBS)
        return -1;
      *t = d->subs[id];
      return 0;
    }
  if (c == 'T')
    {
      d->p++;
      id = read_seq_id (d);
      if (id < 0)
        return -1;
      if (id < d->ntargs && id < MAX_TARGS)
        *t = d->targs[id];
      add_sub (d, *t);
      return 0;
    }
  if (c == 'D')
    {
      if (strncmp (d->p, "DF16_", 5) == 0)
        d->p += 5;
      else if (strncmp (d->p, "Dh", 2) == 0)
        d->p += 2;
      else
        return -1;
      t->dtype = GM_FLOAT16;
      return 0;
    }
  if (c >= '1' && c <= '9')
    {
      if (read_source_name (d, name, sizeof name) != 0)
        return -1;
      t->dtype = strcmp (name, "__half") == 0 ? GM_FLOAT16
                 : strcmp (name, "float2") == 0 ? GM_COMPLEX64
                 : strcmp (name, "double2") == 0 ? GM_COMPLEX128 : -1;
      if (*d->p == 'I')
        {
          /* A class template's instance: its arguments say nothing of
             the dtype here.  */
          mangled_type saved[MAX_TARGS];
          int nsaved = d->ntargs;
          memcpy (saved, d->targs, sizeof saved);
          add_sub (d, *t);
          d->p++;
          if (read_template_args (d) != 0)
            return -1;
          memcpy (d->targs, saved, sizeof saved);
          d->ntargs = nsaved;
          t->dtype = -1;
        }
      add_sub (d, *t);
      return 0;
    }
  dtype = builtin_dtype (c, &is_void);
  if (dtype == -2)
    return -1;
  d->p++;
  t->dtype = dtype;
  t->is_void = is_void;
  return 0;
}

/* Reads the function name of D's mangled name, up to its parameters
   (past the return type of a template).  0, or -1.  */
static int
read_function_name (demangler *d)
{
  char name[256];
  bool is_template = false;

  if (*d->p == 'L')
    d->p++;
  if (*d->p == 'N')
    {
      d->p++;
      for (int n = 0; *d->p != 'E'; n++)
        {
          if (n > 0)
            add_sub (d, unknown_type);
          if (*d->p == 'I')
            {
              add_sub (d, unknown_type);
              d->p++;
              if (read_template_args (d) != 0)
                return -1;
              is_template = true;
              if (*d->p != 'E')
                return -1;
              break;
            }
          if (read_source_name (d, name, sizeof name) != 0)
            return -1;
        }
      d->p++;
    }
  else
    {
      if (read_source_name (d, name, sizeof name) != 0)
        return -1;
      if (*d->p == 'I')
        {
          add_sub (d, unknown_type);
          d->p++;
          if (read_template_args (d) != 0)
            return -1;
          is_template = true;
        }
    }
  if (is_template)
    {
      mangled_type ret;
      return read_type (d, &ret);
    }
  return 0;
}

static void
type_text (const mangled_type *t, char *buf, size_t size)
{
  const char *base = t->is_void ? "void"
                     : t->dtype >= 0 ? gm_dtypes[t->dtype].name
                                     : "a type of no dtype";
  snprintf (buf, size, "%s%s%s", t->pointers && t->is_const ? "const " : "",
            base, t->pointers == 0 ? "" : t->pointers == 1 ? " *" : " **");
}

gm_status
gm_kernel_signature_check_lowered (const gm_kernel *kernel,
                                   const char *lowered)
{
  demangler d;
  mangled_type params[GM_MAX_KERNEL_PARAMS + 1];
  int n = 0;

  memset (&d, 0, sizeof d);
  if (lowered == NULL || strncmp (lowered, "_Z", 2) != 0)
    return GM_OK;
  d.p = lowered + 2;
  if (read_function_name (&d) != 0)
    return GM_OK;
  /* More than GM_MAX_KERNEL_PARAMS are not read: no signature has
     that many.  */
  while (*d.p != '\0' && *d.p != '.' && n <= GM_MAX_KERNEL_PARAMS)
    {
      mangled_type t;
      if (read_type (&d, &t) != 0)
        return GM_OK;
      params[n++] = t;
    }
  if (n == 1 && params[0].is_void && params[0].pointers == 0)
    n = 0;
  if (n != kernel->nparams)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "kernel '%s': the signature "
                         "lists %d parameter%s but the kernel (%.200s) takes "
                         "%d%s", kernel->name, kernel->nparams,
                         kernel->nparams == 1 ? "" : "s", lowered, n,
                         n > GM_MAX_KERNEL_PARAMS ? " or more" : "");
  for (int i = 0; i < n; i++)
    {
      const gm_kernel_param *param = &kernel->params[i];
      const mangled_type *t = &params[i];
      bool array = param->kind != GM_PARAM_SCALAR;
      char have[64], want[64];
      const char *why = NULL;

      if (array ? t->pointers == 0 : t->pointers != 0)
        why = array ? "a scalar for an array" : "a pointer for a scalar";
      else if (t->pointers <= 1 && t->dtype >= 0
               && t->dtype != (int) param->dtype)
        why = "another dtype";
      else if (t->pointers == 1 && t->is_const && param->kind != GM_PARAM_IN)
        why = "a const array, which it cannot write: make it 'in'";
      if (why == NULL)
        continue;
      type_text (t, have, sizeof have);
      snprintf (want, sizeof want, "%s%s%s",
                !array ? "" : param->kind == GM_PARAM_IN ? "in "
                : param->kind == GM_PARAM_OUT ? "out " : "inout ",
                gm_dtypes[param->dtype].name, array ? " *" : "");
      return gm_error_set (GM_ERR_VALUE, 0, NULL, "kernel '%s': parameter %d "
                           "('%s') is %s in the signature, but the kernel "
                           "(%.200s) takes %s: %s", kernel->name, i,
                           param->name,
                           want, lowered, have, why);
    }
  return GM_OK;
}
