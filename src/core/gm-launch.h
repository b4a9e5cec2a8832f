/* gm-launch.h -- what a kernel launch is made of, in plain C.

   Shared by gpumem's core (gm.h), the kernel registry and the kernels
   themselves (kernels/kernels.h): the C type of each dtype name a kernel
   parameter may use, one checked argument (gm_arg), the launch shape
   (gm_launch_cfg) and the parameter limit.  It includes no CUDA and no
   Python, only the installed kernel author's header (include/gpumem/
   kernel.h, itself plain C), so a file that only needs these types
   compiles without the CUDA toolkit.  */

#ifndef GM_LAUNCH_H
#define GM_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The C types of the dtype names (gm_ctype_*), gm_arg, gm_launch_cfg,
   GM_MAX_KERNEL_PARAMS and the GM_SEP_* separators are those of the
   kernel author's installed header, so that a plugin and gpumem agree
   on them by construction.  Its GM_IN... macros write plugin tables;
   every .def reader here defines its own, so they go.  */
#include "gpumem/kernel.h"
#undef GM_IN
#undef GM_OUT
#undef GM_INOUT
#undef GM_SCALAR

/* The field of gm_arg that holds a scalar of each dtype name.  */
#define GM_FIELD_int8 i8
#define GM_FIELD_int16 i16
#define GM_FIELD_int32 i32
#define GM_FIELD_int64 i64
#define GM_FIELD_uint8 u8
#define GM_FIELD_uint16 u16
#define GM_FIELD_uint32 u32
#define GM_FIELD_uint64 u64
#define GM_FIELD_float32 f32
#define GM_FIELD_float64 f64

#ifdef __cplusplus
extern "C" {
#endif

/* Frees what the built-in kernels keep on DEVICE between launches (the
   per-stream scratch of algo), with DEVICE current and its work done.
   Defined with the kernels (kernels/launchers.cu), in CUDA builds only;
   the CUDA backend calls it at shutdown, before it trims the pools.  */
void gm_kernels_release (int device);

#ifdef __cplusplus
}
#endif

#endif /* GM_LAUNCH_H */
