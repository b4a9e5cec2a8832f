/* host-reduce.h -- the host backend's elementwise reduction of N arrays
   (host-reduce.c): plain C loops over host memory, which host-backend.c
   runs for its reduce member and for a graph's recorded reduces.  */

#ifndef GM_HOST_REDUCE_H
#define GM_HOST_REDUCE_H

#include <stddef.h>

#include "gm.h"

/* DST[i] = SRCS[0][i] OP ... OP SRCS[N-1][i] for I < COUNT, with the
   meaning gm.h's reduce gives each DTYPE and OP, which
   gm_reduce_check has accepted.  DST may be one of SRCS.  */
void gm_host_reduce_run (void *dst, void *const *srcs, int n, size_t count,
                         gm_dtype dtype, gm_reduce_op op);

#endif /* GM_HOST_REDUCE_H */
