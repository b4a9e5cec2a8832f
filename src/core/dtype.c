/* dtype.c -- the element types gpumem knows, and their names.  */

#include "config.h"

#include <string.h>

#include "dlpack-abi.h"
#include "gm.h"

const gm_dtype_info gm_dtypes[GM_NDTYPES] = {
  [GM_BOOL] = {"bool", 1, 'b', GM_DL_BOOL},
  [GM_INT8] = {"int8", 1, 'i', GM_DL_INT},
  [GM_INT16] = {"int16", 2, 'i', GM_DL_INT},
  [GM_INT32] = {"int32", 4, 'i', GM_DL_INT},
  [GM_INT64] = {"int64", 8, 'i', GM_DL_INT},
  [GM_UINT8] = {"uint8", 1, 'u', GM_DL_UINT},
  [GM_UINT16] = {"uint16", 2, 'u', GM_DL_UINT},
  [GM_UINT32] = {"uint32", 4, 'u', GM_DL_UINT},
  [GM_UINT64] = {"uint64", 8, 'u', GM_DL_UINT},
  [GM_FLOAT16] = {"float16", 2, 'f', GM_DL_FLOAT},
  [GM_FLOAT32] = {"float32", 4, 'f', GM_DL_FLOAT},
  [GM_FLOAT64] = {"float64", 8, 'f', GM_DL_FLOAT},
  [GM_COMPLEX64] = {"complex64", 8, 'c', GM_DL_COMPLEX},
  [GM_COMPLEX128] = {"complex128", 16, 'c', GM_DL_COMPLEX},
};

int
gm_dtype_from_name (const char *name, size_t len)
{
  for (int d = 0; d < GM_NDTYPES; d++)
    if (strlen (gm_dtypes[d].name) == len
        && memcmp (gm_dtypes[d].name, name, len) == 0)
      return d;
  return -1;
}

int
gm_dtype_from_typestr (const char *typestr)
{
  char kind;
  size_t itemsize = 0;

  if (typestr == NULL || strlen (typestr) < 3)
    return -1;
  /* Big-endian data would need swapping; gpumem's devices are
     little-endian, as are the producers it talks to.  */
  if (typestr[0] != '<' && typestr[0] != '|' && typestr[0] != '=')
    return -1;
  kind = typestr[1];
  for (const char *p = typestr + 2; *p; p++)
    {
      if (*p < '0' || *p > '9' || itemsize > 64)
        return -1;
      itemsize = itemsize * 10 + (size_t) (*p - '0');
    }
  for (int d = 0; d < GM_NDTYPES; d++)
    if (gm_dtypes[d].kind == kind && gm_dtypes[d].itemsize == itemsize)
      return d;
  return -1;
}

void
gm_dtype_typestr (gm_dtype dtype, char buf[8])
{
  const gm_dtype_info *info = &gm_dtypes[dtype];
  size_t itemsize = info->itemsize;
  int n = 0;

  /* Written by hand, not with snprintf: the C API describes every
     argument of a C++ binding's call with it.  Item sizes are 1 to 16.  */
  buf[n++] = itemsize == 1 ? '|' : '<';
  buf[n++] = info->kind;
  if (itemsize >= 10)
    buf[n++] = (char) ('0' + itemsize / 10);
  buf[n++] = (char) ('0' + itemsize % 10);
  buf[n] = '\0';
}

int
gm_dtype_from_format (const char *format, size_t itemsize)
{
  if (format == NULL)
    format = "B";
  if (*format == '@' || *format == '=' || *format == '<')
    format++;
  if (strcmp (format, "Zf") == 0)
    return GM_COMPLEX64;
  if (strcmp (format, "Zd") == 0)
    return GM_COMPLEX128;
  if (format[0] == '\0' || format[1] != '\0')
    return -1;
  switch (format[0])
    {
    case '?':
      return GM_BOOL;
    case 'e':
      return GM_FLOAT16;
    case 'f':
      return GM_FLOAT32;
    case 'd':
      return GM_FLOAT64;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
      switch (itemsize)
        {
        case 1: return GM_INT8;
        case 2: return GM_INT16;
        case 4: return GM_INT32;
        case 8: return GM_INT64;
        default: return -1;
        }
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N':
      switch (itemsize)
        {
        case 1: return GM_UINT8;
        case 2: return GM_UINT16;
        case 4: return GM_UINT32;
        case 8: return GM_UINT64;
        default: return -1;
        }
    default:
      return -1;
    }
}
