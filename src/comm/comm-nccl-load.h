/* comm-nccl-load.h -- finding and opening NCCL at run time
   (comm-nccl-load.c), as NVRTC is: the NCCL engine (comm-nccl.c) calls
   NCCL through the library opened here, so that gpumem runs, with
   collectives through MPI or host memory, where NCCL is absent.  Plain
   C: no NCCL or CUDA headers here.  */

#ifndef GM_COMM_NCCL_LOAD_H
#define GM_COMM_NCCL_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "gm.h"

/* Records PATH, the libnccl.so.2 of NVIDIA's nvidia-nccl-cu13 wheel
   that the Python layer found (the package nvidia.nccl), to be tried
   before the system's; copied.  Before the first gm_nccl_open.  */
void gm_nccl_set_wheel_library (const char *path);

/* Opens NCCL, once a process; the handle in *HANDLE.  Tries, in order:
   GPUMEM_NCCL (a path: when set, it alone), the wheel's library
   (gm_nccl_set_wheel_library, else nvidia/nccl/lib beside gpumem's own
   file), the library configure found, and libnccl.so.2 on the library
   path.  GM_OK, or GM_ERR_UNAVAILABLE naming what was tried and how to
   get NCCL (pip install 'gpumem[nccl]'), the same each call.  */
gm_status gm_nccl_open (void **handle);

/* After gm_nccl_open succeeded: the path of the library opened, into
   BUF (SIZE bytes), and how it was found ("GPUMEM_NCCL", "the
   nvidia-nccl-cu13 wheel", "configure's", "the library path").  False
   before.  */
bool gm_nccl_opened (char *buf, size_t size, const char **how);

#endif /* GM_COMM_NCCL_LOAD_H */
