/* saxpy-ref.c -- the CPU reference of saxpy.cu.  */

#include "kernels.h"

/* Set Y[i] = A * X[i] + Y[i] for i < N (nothing for N <= 0), the
   product and the sum each rounded to float.  With -std=c11 GCC does
   not fuse them into one multiply-add (-ffp-contract=off), so the
   result equals saxpy.cu's bit for bit; a build with -std=gnu11 and
   an FMA target could differ in the last place.  X and Y may be the
   same array.  Cannot fail.  */
void
gm_ref_saxpy (int64_t n, float a, const float *x, float *y)
{
  for (int64_t i = 0; i < n; i++)
    y[i] = a * x[i] + y[i];
}
