/* gm-dtype.h -- the element types gpumem knows, and their names (dtype.c).  */

#ifndef GM_DTYPE_H
#define GM_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most dimensions an array may have.  */
#define GM_MAX_NDIM 32

/* Element types.  */
typedef enum gm_dtype
{
  GM_BOOL,
  GM_INT8, GM_INT16, GM_INT32, GM_INT64,
  GM_UINT8, GM_UINT16, GM_UINT32, GM_UINT64,
  GM_FLOAT16, GM_FLOAT32, GM_FLOAT64,
  GM_COMPLEX64, GM_COMPLEX128,
  GM_NDTYPES
} gm_dtype;

typedef struct gm_dtype_info
{
  const char *name;       /* NumPy's name: "float32" */
  size_t itemsize;
  char kind;              /* NumPy's kind: b i u f c */
  uint8_t dlpack_code;    /* DLDataTypeCode */
} gm_dtype_info;

extern const gm_dtype_info gm_dtypes[GM_NDTYPES];

/* The dtype called NAME ("float32", ...), of LEN bytes; -1 if none.  */
int gm_dtype_from_name (const char *name, size_t len);

/* The dtype of a NumPy array-interface type string such as "<f4";
   -1 if gpumem has none.  */
int gm_dtype_from_typestr (const char *typestr);

/* The dtype of a buffer-protocol (struct module) FORMAT whose items are
   ITEMSIZE bytes ("f", "<i" of 4, "Zd"; NULL means "B"); -1 if gpumem
   has none or the byte order is not native little-endian.  */
int gm_dtype_from_format (const char *format, size_t itemsize);

/* Writes the little-endian array-interface type string of DTYPE
   ("<f4", "|b1", "<c16") into BUF.  */
void gm_dtype_typestr (gm_dtype dtype, char buf[8]);

#endif /* GM_DTYPE_H */
