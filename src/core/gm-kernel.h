/* gm-kernel.h -- kernel descriptions: the registry, parameters and their
   length expressions (kernel.c).  */

#ifndef GM_KERNEL_H
#define GM_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gm-dtype.h"
#include "gm-launch.h"
#include "gm-status.h"

/* The kernel registry (kernels/registry.c).  */
typedef enum gm_param_kind
{
  GM_PARAM_IN, GM_PARAM_OUT, GM_PARAM_INOUT, GM_PARAM_SCALAR
} gm_param_kind;

typedef struct gm_kernel_param
{
  const char *name;
  gm_param_kind kind;
  gm_dtype dtype;
  const char *length;       /* minimum length expression, NULL for scalars */
} gm_kernel_param;

typedef struct gm_kernel
{
  const char *name;
  const char *doc;
  int nparams;
  gm_kernel_param params[GM_MAX_KERNEL_PARAMS];
  /* Run the C reference on host memory; NULL when the kernel has none
     (the host backend then refuses it).  */
  void (*run_host) (const gm_arg *args);
  /* Enqueue the CUDA kernel; returns a cudaError_t.  STREAM is a
     cudaStream_t.  NULL when built without CUDA, for a kernel with only
     a C reference, and for JIT kernels (the backend launches JIT).  */
  int (*launch_cuda) (const gm_arg *args, const gm_launch_cfg *cfg,
                      void *stream);
  /* Where the kernel comes from: NULL for one built in, else the
     plugin's file, the embedding program's name or "jit".  */
  const char *origin;
  /* A kernel compiled at run time (jit.c): its code, which the CUDA
     backend loads on first launch; NULL for every other kernel.  */
  struct gm_jit_code *jit;
} gm_kernel;

/* The kernels built into this program, in registry order.  */
extern const gm_kernel gm_kernel_table[];
extern const int gm_kernel_count;

/* The built-in kernel called NAME, or NULL (plugin.h's gm_kernels_get
   lists the preloaded plugins' kernels too).  */
const gm_kernel *gm_kernel_find (const char *name);

/* Writes "name: dtype[length] in" (or "name: dtype" for scalars) for
   PARAM into BUF of SIZE bytes.  */
void gm_kernel_param_format (const gm_kernel_param *param, char *buf,
                             size_t size);

/* Evaluates the length expression EXPR of KERNEL, with the scalar
   arguments ARGS, into *VALUE.  GM_ERR_VALUE when EXPR is malformed,
   names no scalar parameter, divides by zero or overflows.  ARGS may be
   NULL to check only the syntax and names (then *VALUE is 0).  */
gm_status gm_kernel_eval_length (const gm_kernel *kernel, const char *expr,
                                 const gm_arg *args, int64_t *value);

#endif /* GM_KERNEL_H */
