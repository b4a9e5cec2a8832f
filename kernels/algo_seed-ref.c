/* algo_seed-ref.c -- the CPU reference of algo_seed.cu.  */

#include "kernels.h"

/* The stitching workload, as algo_seed.cu runs it: for every image i and
   every k < 4, PARTIAL_UPDATE[k] = IMAGES[i] + UPDATE[k], in the same
   order, so the result (IMAGES[N - 1] + UPDATE[k]; nothing written
   when NUMBER_OF_IMAGES <= 0) matches the device's bit for bit, also
   when the outputs overlap the inputs.  Cannot fail.  */
void
gm_ref_algo_seed (const float *images, const float *update,
                  float *partial_update, int64_t number_of_images)
{
  for (int64_t i = 0; i < number_of_images; i++)
    for (int k = 0; k < 4; k++)
      partial_update[k] = images[i] + update[k];
}
