/* reduce.c -- what the backends' reduce accepts (gm.h): the one check
   of its arguments, which every backend makes before it touches a
   byte.  */

#include "config.h"

#include "gm.h"

const char *
gm_reduce_op_name (gm_reduce_op op)
{
  switch (op)
    {
    case GM_REDUCE_SUM:
      return "sum";
    case GM_REDUCE_MAX:
      return "max";
    case GM_REDUCE_MIN:
      return "min";
    }
  return "?";
}

gm_status
gm_reduce_check (int n, gm_dtype dtype, gm_reduce_op op)
{
  if (n < 1 || n > GM_REDUCE_MAX_INPUTS)
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "reduce combines 1 to %d arrays, not %d",
                         GM_REDUCE_MAX_INPUTS, n);
  if (op != GM_REDUCE_SUM && op != GM_REDUCE_MAX && op != GM_REDUCE_MIN)
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "reduce has no operation numbered %d", (int) op);
  if ((int) dtype < 0 || dtype >= GM_NDTYPES)
    return gm_error_set (GM_ERR_TYPE, 0, NULL,
                         "reduce has no dtype numbered %d", (int) dtype);
  if (dtype == GM_FLOAT16)
    return gm_error_set (GM_ERR_TYPE, 0, NULL,
                         "reduce cannot combine float16 arrays; use "
                         "float32");
  if (gm_dtypes[dtype].kind == 'c' && op != GM_REDUCE_SUM)
    return gm_error_set (GM_ERR_TYPE, 0, NULL,
                         "reduce op '%s' is not defined for %s: complex "
                         "numbers have no order (sum is)",
                         gm_reduce_op_name (op), gm_dtypes[dtype].name);
  return GM_OK;
}
