/* gm-launch.h -- what a kernel launch is made of, in plain C.

   Shared by gpumem's core (gm.h), the kernel registry and the kernels
   themselves (kernels/kernels.h): the C type of each dtype name a kernel
   parameter may use, one checked argument (gm_arg), the launch shape
   (gm_launch_cfg) and the parameter limit.  It includes no CUDA, no
   Python and no other gpumem header, so a file that only needs these
   types compiles without the CUDA toolkit.  */

#ifndef GM_LAUNCH_H
#define GM_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The C type of each dtype name a kernel parameter may use.  */
typedef float gm_ctype_float32;
typedef double gm_ctype_float64;
typedef int8_t gm_ctype_int8;
typedef int16_t gm_ctype_int16;
typedef int32_t gm_ctype_int32;
typedef int64_t gm_ctype_int64;
typedef uint8_t gm_ctype_uint8;
typedef uint16_t gm_ctype_uint16;
typedef uint32_t gm_ctype_uint32;
typedef uint64_t gm_ctype_uint64;

/* One argument of a kernel call, already checked.  */
typedef union gm_arg
{
  void *ptr;
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  float f32;
  double f64;
} gm_arg;

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

/* How a launch is shaped.  GRID[0] == 0 means the launcher chooses grid
   and block itself from SM_COUNT and MAX_THREADS_PER_BLOCK (read off the
   device once by the backend); otherwise GRID and BLOCK are used as
   given, already checked against the device's limits.  */
typedef struct gm_launch_cfg
{
  unsigned int grid[3];
  unsigned int block[3];
  int sm_count;
  int max_threads_per_block;
} gm_launch_cfg;

/* The most parameters a kernel may have.  */
#define GM_MAX_KERNEL_PARAMS 16

/* Separators for parameter lists made from a .def file: parameter 0 has
   none before it, every later one a comma.  */
#define GM_SEP_0
#define GM_SEP_1 ,
#define GM_SEP_2 ,
#define GM_SEP_3 ,
#define GM_SEP_4 ,
#define GM_SEP_5 ,
#define GM_SEP_6 ,
#define GM_SEP_7 ,
#define GM_SEP_8 ,
#define GM_SEP_9 ,
#define GM_SEP_10 ,
#define GM_SEP_11 ,
#define GM_SEP_12 ,
#define GM_SEP_13 ,
#define GM_SEP_14 ,
#define GM_SEP_15 ,

#ifdef __cplusplus
}
#endif

#endif /* GM_LAUNCH_H */
