/* kernel-signature.h -- a kernel's parameters from signature text.  */

#ifndef GM_KERNEL_SIGNATURE_H
#define GM_KERNEL_SIGNATURE_H

#include "gm.h"

/* Parses TEXT (the notation of gpumem/kernel.h: "int64 n, float32 a,
   inout float32 *x[n]") into KERNEL's params and nparams; KERNEL->name
   must be set (messages name it).  On success *STORAGE is a malloc'd
   block that the names and length expressions point into, freed by
   the caller when the kernel goes.  GM_ERR_VALUE naming the kernel,
   the text, what is wrong and where, for a signature that does not
   parse, names a dtype gpumem lacks, repeats a parameter name, has
   more than GM_MAX_KERNEL_PARAMS parameters or a length expression
   that gm_kernel_eval_length refuses; then KERNEL->nparams is 0.  */
gm_status gm_kernel_signature_parse (gm_kernel *kernel, const char *text,
                                     char **storage);

/* Writes KERNEL's params into BUF of SIZE bytes in one spelling, the
   same for every text that parses to them: "int64 n,float32 a,inout
   float32 *x[n]" (directions given, no spaces but one after each dtype,
   none in lengths).  0, or -1 when BUF is too small.  */
int gm_kernel_signature_format (const gm_kernel *kernel, char *buf,
                                size_t size);

/* Checks KERNEL's params against LOWERED, the kernel's lowered name
   (NVRTC's nvrtcGetLoweredName): for a C++ kernel, its mangled name,
   which gives the count of its parameters and, for the types it can
   read (kernel-signature.c lists them), whether each is a pointer or a
   scalar, its dtype, and whether a pointer's elements are const (a
   const array must be 'in').  GM_ERR_VALUE naming the kernel, the
   parameter and both types at the first mismatch.  GM_OK for a name
   that is not mangled (extern "C": it shows no types) or cannot be
   read.  */
gm_status gm_kernel_signature_check_lowered (const gm_kernel *kernel,
                                             const char *lowered);

#endif /* GM_KERNEL_SIGNATURE_H */
