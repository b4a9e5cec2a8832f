/* fuzz-dtype.c -- libFuzzer target: dtype names, array-interface type
   strings and buffer-protocol formats (gm_dtype_from_name,
   gm_dtype_from_typestr, gm_dtype_typestr and gm_dtype_from_format in
   src/core/dtype.c).

   The input is used twice: as a name of exactly SIZE bytes, not NUL
   terminated (so that a read past its end is an AddressSanitizer
   error), as a C string up to its first NUL as a type string, and,
   past its first byte (which picks an item size), as a buffer format.
   An answer must describe what was asked: the name spelled exactly,
   the kind and item size that the type string or format says.  */

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

/* The NumPy kind a buffer-protocol format of one code (or Zf, Zd)
   stands for, or 0.  */
static char
format_kind (const char *format)
{
  if (strcmp (format, "Zf") == 0 || strcmp (format, "Zd") == 0)
    return 'c';
  if (format[0] == '\0' || format[1] != '\0')
    return 0;
  if (format[0] == '?')
    return 'b';
  if (strchr ("efd", format[0]) != NULL)
    return 'f';
  if (strchr ("bhilqn", format[0]) != NULL)
    return 'i';
  if (strchr ("BHILQN", format[0]) != NULL)
    return 'u';
  return 0;
}

/* gm_dtype_from_format on the SIZE bytes at DATA (up to a NUL) with
   items of ITEMSIZE bytes: its answer has the format's kind, and an
   integer's item size.  */
static void
check_format (const uint8_t *data, size_t size, size_t itemsize)
{
  char *format = malloc (size + 1);
  const char *code;
  int dtype;

  if (format == NULL)
    return;
  memcpy (format, data, size);
  format[size] = '\0';
  dtype = gm_dtype_from_format (format, itemsize);
  if (dtype >= GM_NDTYPES || dtype < -1)
    abort ();
  if (dtype >= 0)
    {
      code = format;
      if (*code == '@' || *code == '=' || *code == '<')
        code++;
      if (format_kind (code) != gm_dtypes[dtype].kind
          || (strchr ("iu", gm_dtypes[dtype].kind) != NULL
              && gm_dtypes[dtype].itemsize != itemsize))
        abort ();
    }
  free (format);
}

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

  if (size > 0)
    check_format (data + 1, size - 1, (size_t) 1 << (data[0] % 5));
  return 0;
}
