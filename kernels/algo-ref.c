/* algo-ref.c -- the CPU reference of algo.cu.  */

#include "kernels.h"

/* Set PARTIAL_UPDATE[k] = mean (IMAGES[0:NUMBER_OF_IMAGES]) + UPDATE[k]
   for k < 4, the mean summed in double in index order and each output
   rounded once to float; with no images (NUMBER_OF_IMAGES <= 0) the
   mean is 0.  algo.cu computes the same and says how close the two
   are.  Every image is read before the first output is written, so the
   outputs may overlap the inputs.  Cannot fail.  */
void
gm_ref_algo (const float *images, const float *update, float *partial_update,
             int64_t number_of_images)
{
  double sum = 0.0;
  double mean = 0.0;

  for (int64_t i = 0; i < number_of_images; i++)
    sum += (double) images[i];
  if (number_of_images > 0)
    mean = sum / (double) number_of_images;
  for (int k = 0; k < 4; k++)
    partial_update[k] = (float) (mean + (double) update[k]);
}
