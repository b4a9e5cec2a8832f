/* cuda-reduce.h -- the launcher of the CUDA backend's elementwise
   reduction of N arrays (cuda-reduce.cu), callable from C: cuda-launch.c
   checks the arguments, picks the device and orders the work; the
   launcher queues the kernel.  */

#ifndef GM_CUDA_REDUCE_H
#define GM_CUDA_REDUCE_H

#include <stddef.h>

#include "gm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Queues on STREAM (a cudaStream_t) of the current device the kernel
   that writes DST[i] = SRCS[0][i] OP ... OP SRCS[N-1][i] for I < COUNT,
   with gm.h's meaning of reduce, for arguments gm_reduce_check accepted;
   SM_COUNT, the device's multiprocessors, sizes the grid.  Nothing for
   COUNT 0.  Returns the launch's cudaError_t (cudaErrorInvalidValue for
   a DTYPE and OP the kernel does not have).  */
int gm_cuda_reduce_launch (void *dst, void *const *srcs, int n, size_t count,
                           gm_dtype dtype, gm_reduce_op op, int sm_count,
                           void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GM_CUDA_REDUCE_H */
