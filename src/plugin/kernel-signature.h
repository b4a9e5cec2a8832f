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

#endif /* GM_KERNEL_SIGNATURE_H */
