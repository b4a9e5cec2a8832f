/* host-reduce.c -- the host backend's elementwise reduction of N arrays
   (host-reduce.h), one C loop per dtype and operation.  Each element is
   combined from SRCS[0] to SRCS[N-1] in that order, as the CUDA
   backend's kernel (cuda-reduce.cu) does, so that both give the same
   bits.  */

#include "config.h"

#include <stdint.h>

#include "host-reduce.h"

typedef struct host_complex64
{
  float re, im;
} host_complex64;

typedef struct host_complex128
{
  double re, im;
} host_complex128;

/* Element I of DST from the N arrays of TYPE: ACC starts as FIRST, made
   of A0, SRCS[0][I], and takes COMBINE with B, each later array's
   element, in turn.  Every element of the sources is read before DST's is written,
   so DST may be one of them.  */
#define REDUCE_EACH(TYPE, FIRST, COMBINE)                               \
  do                                                                    \
    {                                                                   \
      TYPE *out = dst;                                                  \
      for (size_t i = 0; i < count; i++)                                \
        {                                                               \
          TYPE a0 = ((const TYPE *) srcs[0])[i];                        \
          TYPE acc = FIRST;                                             \
          for (int k = 1; k < n; k++)                                   \
            {                                                           \
              TYPE b = ((const TYPE *) srcs[k])[i];                     \
              acc = COMBINE;                                            \
            }                                                           \
          out[i] = acc;                                                 \
        }                                                               \
    }                                                                   \
  while (0)

/* SUM as ADD, MAX and MIN as the comparisons gm.h's reduce names: the
   earlier operand stays on ties and NaN.  */
#define REDUCE_ORDERED(TYPE, ADD)                                       \
  do                                                                    \
    {                                                                   \
      if (op == GM_REDUCE_SUM)                                          \
        REDUCE_EACH (TYPE, a0, ADD);                                   \
      else if (op == GM_REDUCE_MAX)                                     \
        REDUCE_EACH (TYPE, a0, b > acc ? b : acc);                     \
      else                                                              \
        REDUCE_EACH (TYPE, a0, b < acc ? b : acc);                     \
    }                                                                   \
  while (0)

/* Integers add as the unsigned type UTYPE of their width, wrapping
   around.  */
#define REDUCE_INTEGER(TYPE, UTYPE)                                     \
  REDUCE_ORDERED (TYPE, (TYPE) (UTYPE) ((UTYPE) acc + (UTYPE) b))

void
gm_host_reduce_run (void *dst, void *const *srcs, int n, size_t count,
                    gm_dtype dtype, gm_reduce_op op)
{
  switch (dtype)
    {
    case GM_BOOL:
      if (op == GM_REDUCE_MIN)
        REDUCE_EACH (unsigned char, a0 != 0, acc && b);
      else
        REDUCE_EACH (unsigned char, a0 != 0, acc || b);
      break;
    case GM_INT8:
      REDUCE_INTEGER (int8_t, uint8_t);
      break;
    case GM_INT16:
      REDUCE_INTEGER (int16_t, uint16_t);
      break;
    case GM_INT32:
      REDUCE_INTEGER (int32_t, uint32_t);
      break;
    case GM_INT64:
      REDUCE_INTEGER (int64_t, uint64_t);
      break;
    case GM_UINT8:
      REDUCE_INTEGER (uint8_t, uint8_t);
      break;
    case GM_UINT16:
      REDUCE_INTEGER (uint16_t, uint16_t);
      break;
    case GM_UINT32:
      REDUCE_INTEGER (uint32_t, uint32_t);
      break;
    case GM_UINT64:
      REDUCE_INTEGER (uint64_t, uint64_t);
      break;
    case GM_FLOAT32:
      REDUCE_ORDERED (float, acc + b);
      break;
    case GM_FLOAT64:
      REDUCE_ORDERED (double, acc + b);
      break;
    case GM_COMPLEX64:
      REDUCE_EACH (host_complex64, a0,
                   ((host_complex64) {acc.re + b.re, acc.im + b.im}));
      break;
    case GM_COMPLEX128:
      REDUCE_EACH (host_complex128, a0,
                   ((host_complex128) {acc.re + b.re, acc.im + b.im}));
      break;
    case GM_FLOAT16:
    case GM_NDTYPES:
      break;
    }
}
