/* fuzz-dtype.c -- libFuzzer target: dtype names and array-interface type
   strings (gm_dtype_from_name, gm_dtype_from_typestr and
   gm_dtype_typestr in src/dtype.c).

   The input is used twice: as a name of exactly SIZE bytes, not NUL
   terminated (so that a read past its end is an AddressSanitizer
   error), and as a C string up to its first NUL as a type string.  An
   answer must describe what was asked: the name spelled exactly, the
   kind and item size that the type string says.  */

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gm.h"

/* The item size a valid type string TYPESTR spells after its kind.  */
static size_t
spelled_itemsize (const char *typestr)
{
  size_t n = 0;

  for (const char *p = typestr + 2; *p; p++)
    n = n * 10 + (size_t) (*p - '0');
  return n;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static bool round_trips_checked;
  char *name, *typestr;
  int dtype;

  if (!round_trips_checked)
    {
      /* Every dtype's own type string and name lead back to it.  */
      for (int d = 0; d < GM_NDTYPES; d++)
        {
          char own[8];
          gm_dtype_typestr ((gm_dtype) d, own);
          if (gm_dtype_from_typestr (own) != d
              || gm_dtype_from_name (gm_dtypes[d].name,
                                     strlen (gm_dtypes[d].name)) != d)
            abort ();
        }
      round_trips_checked = true;
    }

  /* Exactly SIZE bytes, no terminator.  */
  name = malloc (size ? size : 1);
  if (name == NULL)
    return 0;
  memcpy (name, data, size);
  dtype = gm_dtype_from_name (name, size);
  if (dtype >= GM_NDTYPES || dtype < -1)
    abort ();
  if (dtype >= 0 && (strlen (gm_dtypes[dtype].name) != size
                     || memcmp (gm_dtypes[dtype].name, name, size) != 0))
    abort ();
  free (name);

  typestr = malloc (size + 1);
  if (typestr == NULL)
    return 0;
  memcpy (typestr, data, size);
  typestr[size] = '\0';
  dtype = gm_dtype_from_typestr (typestr);
  if (dtype >= GM_NDTYPES || dtype < -1)
    abort ();
  if (dtype >= 0)
    {
      char own[8];
      if (strchr ("<|=", typestr[0]) == NULL
          || typestr[1] != gm_dtypes[dtype].kind
          || spelled_itemsize (typestr) != gm_dtypes[dtype].itemsize)
        abort ();
      gm_dtype_typestr ((gm_dtype) dtype, own);
      if (gm_dtype_from_typestr (own) != dtype)
        abort ();
    }
  free (typestr);
  return 0;
}
