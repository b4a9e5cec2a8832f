/* fuzz-signature.c -- libFuzzer target: kernel signatures as text
   (gm_kernel_signature_parse in src/plugin/kernel-signature.c), as plugin
   tables and gpumem.jit give them, and the check of a parsed one against
   a kernel's lowered name (gm_kernel_signature_check_lowered), as NVRTC
   or a JIT cache file gives it.

   Input: the signature text, up to the first NUL; after it, the lowered
   name, up to the next NUL or the end.  The check must answer GM_OK or
   GM_ERR_VALUE, and its signature and format as one.  A signature that
   parses must describe a kernel gpumem can call: at most
   GM_MAX_KERNEL_PARAMS parameters with distinct identifier names, none
   of them a launch option, scalars of a number dtype without a length,
   arrays with a length expression that gm_kernel_eval_length accepts.
   One that does not parse must leave no parameters.  Anything else
   aborts, as loudly as a crash.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "kernel-signature.h"

/* kernel.c reads the registry: here, one fake kernel.  */
const gm_kernel gm_kernel_table[] = {
  {"fake", "", 0, {{NULL, 0, 0, NULL}}, NULL, NULL, NULL, NULL}
};
const int gm_kernel_count = 1;

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
check_identifier (const char *name)
{
  if (name == NULL || !(isalpha ((unsigned char) name[0]) || name[0] == '_'))
    abort ();
  for (const char *p = name; *p; p++)
    if (!isalnum ((unsigned char) *p) && *p != '_')
      abort ();
  if (strcmp (name, "grid") == 0 || strcmp (name, "block") == 0
      || strcmp (name, "stream") == 0)
    abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = malloc (size + 2), *storage = NULL, canonical[4096];
  gm_kernel kernel = {.name = "fuzzed"}, again = {.name = "again"};
  const char *lowered;
  gm_status status;

  if (text == NULL)
    return 0;
  memcpy (text, data, size);
  text[size] = text[size + 1] = '\0';
  lowered = text + strlen (text) + 1;
  if (gm_kernel_signature_parse (&kernel, text, &storage) != GM_OK)
    {
      if (kernel.nparams != 0 || storage != NULL)
        abort ();
      free (text);
      return 0;
    }
  if (kernel.nparams < 0 || kernel.nparams > GM_MAX_KERNEL_PARAMS)
    abort ();
  for (int i = 0; i < kernel.nparams; i++)
    {
      const gm_kernel_param *param = &kernel.params[i];
      int64_t value;

      check_identifier (param->name);
      for (int j = 0; j < i; j++)
        if (strcmp (kernel.params[j].name, param->name) == 0)
          abort ();
      if ((unsigned) param->dtype >= GM_NDTYPES)
        abort ();
      if (param->kind == GM_PARAM_SCALAR)
        {
          char kind = gm_dtypes[param->dtype].kind;
          if (param->length != NULL || kind == 'b' || kind == 'c'
              || param->dtype == GM_FLOAT16)
            abort ();
        }
      else if (param->length == NULL
               || gm_kernel_eval_length (&kernel, param->length, NULL,
                                         &value) != GM_OK)
        abort ();
    }
  status = gm_kernel_signature_check_lowered (&kernel, lowered);
  if (status != GM_OK && status != GM_ERR_VALUE)
    abort ();
  /* The one spelling parses to the same parameters.  */
  if (gm_kernel_signature_format (&kernel, canonical, sizeof canonical) == 0)
    {
      char *storage2 = NULL;
      if (gm_kernel_signature_parse (&again, canonical, &storage2) != GM_OK
          || again.nparams != kernel.nparams)
        abort ();
      for (int i = 0; i < kernel.nparams; i++)
        if (again.params[i].kind != kernel.params[i].kind
            || again.params[i].dtype != kernel.params[i].dtype
            || strcmp (again.params[i].name, kernel.params[i].name) != 0)
          abort ();
      free (storage2);
    }
  free (storage);
  free (text);
  return 0;
}
