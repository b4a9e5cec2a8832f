/* cuda-status.h -- the one place a cudaError_t becomes gpumem's status
   (cuda-status.c), for every file that calls CUDA: the CUDA backend,
   its staging engine and the NCCL engine.  It also remembers the error
   that lost the CUDA context, so that no caller can go on as if the
   context still worked.  */

#ifndef GM_CUDA_STATUS_H
#define GM_CUDA_STATUS_H

#include <stdbool.h>

#include <cuda_runtime_api.h>

#include "gm.h"

/* Whether ERR loses the CUDA context for good (an illegal address in a
   kernel, say): every later call in the process fails.  */
bool gm_cuda_is_sticky (cudaError_t err);

/* Whether an error lost the context already (gm_cuda_status saw one).  */
bool gm_cuda_lost (void);

/* Sets the last error to say that the context was lost, and after what;
   GM_ERR_CUDA.  Only when gm_cuda_lost ().  */
gm_status gm_cuda_lost_status (void);

/* Records ERR from CALL at FILE:LINE as the last error and returns its
   status: GM_ERR_NOMEM for allocation failures, GM_ERR_CUDA otherwise.
   Clears a non-sticky error so the next call starts clean, and remembers
   a sticky one.  */
gm_status gm_cuda_status (cudaError_t err, const char *call,
                          const char *file, int line);

/* Runs CALL; on an error sets STATUS from gm_cuda_status and jumps to
   the caller's done label.  */
#define GM_CUDA_CHECK(CALL)                                             \
  do                                                                    \
    {                                                                   \
      cudaError_t gm_cuda_check_err = (CALL);                           \
      if (gm_cuda_check_err != cudaSuccess)                             \
        {                                                               \
          status = gm_cuda_status (gm_cuda_check_err, #CALL, __FILE__,  \
                                   __LINE__);                           \
          goto done;                                                    \
        }                                                               \
    }                                                                   \
  while (0)

/* Sets STATUS and jumps to the caller's done label when the context is
   lost.  */
#define GM_CUDA_CHECK_ALIVE()                                           \
  do                                                                    \
    {                                                                   \
      if (gm_cuda_lost ())                                              \
        {                                                               \
          status = gm_cuda_lost_status ();                              \
          goto done;                                                    \
        }                                                               \
    }                                                                   \
  while (0)

#endif /* GM_CUDA_STATUS_H */
