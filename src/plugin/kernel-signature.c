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

#include "config.h"

#include <ctype.h>
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
