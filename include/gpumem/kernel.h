/* gpumem/kernel.h -- writing kernels for gpumem: plugins, embedding.

   A kernel author includes this header alone: it needs no Python, no
   gpumem internals and, for kernels with only a C reference, not even
   CUDA.  It gives

     - the C type of every dtype name (gm_ctype_float32, ...),
     - gm_launch_cfg, the launch shape gpumem passes to a launcher, and
       gm_launch_shape (), which turns it into grid and block,
     - gm_arg, one checked argument as gpumem passes it,
     - the plugin table (gm_plugin_kernel, gm_plugin_info) that a shared
       library exports as gm_plugin_table () and an embedding program
       registers with gm_embed_register (gpumem/embed.h),
     - macros that write that table from the notation of gpumem's own
       kernels/kernels.def:

         #include <gpumem/kernel.h>

         GM_PLUGIN_KERNEL (scale, "x[i] = a * x[i] for i < n.",
           GM_SCALAR (0, n, int64)
           GM_SCALAR (1, a, float32)
           GM_INOUT  (2, x, float32, "n"))

         cudaError_t gm_kernel_scale (int64_t n, float a, float *x,
                                      const gm_launch_cfg *cfg,
                                      cudaStream_t stream) { ... }
         void gm_ref_scale (int64_t n, float a, float *x) { ... }

         GM_PLUGIN_TABLE (scale)

   gpumem-kernels(7) is the manual.  */

#ifndef GPUMEM_KERNEL_H
#define GPUMEM_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the plugin table below.  gpumem refuses a table of
   any other version; the number changes whenever the layout of
   gm_plugin_info, gm_plugin_kernel, gm_launch_cfg or gm_arg does.  */
#define GM_PLUGIN_ABI 1

/* At most this many parameters a kernel.  */
#define GM_MAX_KERNEL_PARAMS 16

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

/* One argument of a kernel call, already checked against the kernel's
   signature: PTR for arrays, the field of its dtype for scalars.  */
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

/* Grids of more blocks than this are refused by gm_launch_shape, so
   that a grid-stride index cannot wrap in 64 bits.  */
#define GM_MAX_BLOCKS ((uint64_t) INT32_MAX)

/* Fills GRID and BLOCK (x, y, z) for a launch shaped by CFG: as given
   when CFG->grid[0] != 0; otherwise blocks of BLOCK_THREADS threads (at
   most the device's maximum) and enough of them for one thread per
   element of N, but, when BLOCKS_PER_SM > 0, at most BLOCKS_PER_SM per
   SM (a grid-stride loop then does the rest).  CFG may be NULL: the
   launcher chooses, on one SM.  Returns 0, or -1 for a shape of no
   threads or of more than GM_MAX_BLOCKS blocks (a launcher then
   returns cudaErrorInvalidConfiguration without launching).  */
static inline int
gm_launch_shape (const gm_launch_cfg *cfg, uint64_t n,
                 unsigned int block_threads, unsigned int blocks_per_sm,
                 unsigned int grid[3], unsigned int block[3])
{
  uint64_t blocks;

  if (cfg != NULL && cfg->grid[0] != 0)
    for (int i = 0; i < 3; i++)
      {
        grid[i] = cfg->grid[i];
        block[i] = cfg->block[i];
      }
  else
    {
      unsigned int threads = block_threads > 0 ? block_threads : 256;
      uint64_t needed;

      if (cfg != NULL && cfg->max_threads_per_block > 0
          && (unsigned int) cfg->max_threads_per_block < threads)
        threads = (unsigned int) cfg->max_threads_per_block;
      needed = n > 0 ? (n - 1) / threads + 1 : 1;
      if (blocks_per_sm > 0)
        {
          uint64_t sms = cfg != NULL && cfg->sm_count > 0
                         ? (uint64_t) cfg->sm_count : 1;
          if (needed > blocks_per_sm * sms)
            needed = blocks_per_sm * sms;
        }
      grid[0] = needed > GM_MAX_BLOCKS ? 0 : (unsigned int) needed;
      grid[1] = grid[2] = 1;
      block[0] = threads;
      block[1] = block[2] = 1;
    }
  blocks = (uint64_t) grid[0] * grid[1] * grid[2];
  if (blocks == 0 || blocks > GM_MAX_BLOCKS
      || (uint64_t) block[0] * block[1] * block[2] == 0)
    return -1;
  return 0;
}

/* One kernel of a plugin table.  */
typedef struct gm_plugin_kernel
{
  /* The Python name: letters, digits and '_', not starting with '_'.  */
  const char *name;
  /* One sentence for help () and gpumem -k; may be NULL.  */
  const char *doc;
  /* The parameters, in order, comma-separated, each one of
       DTYPE NAME                              a scalar
       in|out|inout DTYPE *NAME[LENGTH]        an array
     with DTYPE a name of the gm_ctype_ list above and LENGTH its
     minimum number of elements, an expression of integers, integer
     scalar names, + - * / % and parentheses:
       "int64 n, float32 a, in float32 *x[n], inout float32 *y[n]".
     GM_PLUGIN_KERNEL writes it from kernels.def's notation.  */
  const char *signature;
  /* Enqueues the kernel on STREAM (a cudaStream_t) on the current
     device and returns cudaGetLastError () as an int; NULL when the
     kernel has no CUDA launcher.  */
  int (*launch) (const gm_arg *args, const gm_launch_cfg *cfg, void *stream);
  /* Runs the C reference on host memory (the host backend); NULL when
     the kernel has none.  */
  void (*reference) (const gm_arg *args);
} gm_plugin_kernel;

/* What gm_plugin_table () returns.  ABI comes first in every version,
   so that gpumem can read it from any table.  */
typedef struct gm_plugin_info
{
  uint32_t abi;                              /* GM_PLUGIN_ABI */
  uint32_t count;                            /* entries of KERNELS */
  const gm_plugin_kernel *const *kernels;
} gm_plugin_info;

/* The one symbol a plugin exports (GM_PLUGIN_TABLE defines it).  */
typedef const gm_plugin_info *(*gm_plugin_table_fn) (void);
#define GM_PLUGIN_TABLE_SYMBOL "gm_plugin_table"

#ifdef __cplusplus
}
#endif

/* The notation of kernels/kernels.def.  Each parameter is one of
     GM_IN    (INDEX, NAME, DTYPE, LENGTH)  device array the kernel reads
     GM_OUT   (INDEX, NAME, DTYPE, LENGTH)  device array the kernel writes
     GM_INOUT (INDEX, NAME, DTYPE, LENGTH)  device array read and written
     GM_SCALAR(INDEX, NAME, DTYPE)          a number passed by value
   with INDEX counting from 0 and LENGTH a string ("n", "4 * rows").
   Here each becomes an element of a preprocessor sequence that the
   GM_PLUGIN_ macros below walk three times: for the C prototypes, for
   the adapters that unpack gm_arg, and for the signature text.  */
#define GM_IN(I, NAME, T, LEN) (GM_K_IN, I, NAME, T, LEN)
#define GM_OUT(I, NAME, T, LEN) (GM_K_OUT, I, NAME, T, LEN)
#define GM_INOUT(I, NAME, T, LEN) (GM_K_INOUT, I, NAME, T, LEN)
#define GM_SCALAR(I, NAME, T) (GM_K_SCALAR, I, NAME, T, "")

#define GM_PP_CAT(a, b) GM_PP_CAT_ (a, b)
#define GM_PP_CAT_(a, b) a##b

/* A walk over a sequence (P)(P)... ends at an element of kind GM_K_STOP. */
#define GM_PP_CLASS_GM_K_IN GO
#define GM_PP_CLASS_GM_K_OUT GO
#define GM_PP_CLASS_GM_K_INOUT GO
#define GM_PP_CLASS_GM_K_SCALAR GO
#define GM_PP_CLASS_GM_K_STOP STOP

/* Separators: parameter 0 has none before it, every later one a comma. */
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
#define GM_SIG_SEP_0 ""
#define GM_SIG_SEP_1 ", "
#define GM_SIG_SEP_2 ", "
#define GM_SIG_SEP_3 ", "
#define GM_SIG_SEP_4 ", "
#define GM_SIG_SEP_5 ", "
#define GM_SIG_SEP_6 ", "
#define GM_SIG_SEP_7 ", "
#define GM_SIG_SEP_8 ", "
#define GM_SIG_SEP_9 ", "
#define GM_SIG_SEP_10 ", "
#define GM_SIG_SEP_11 ", "
#define GM_SIG_SEP_12 ", "
#define GM_SIG_SEP_13 ", "
#define GM_SIG_SEP_14 ", "
#define GM_SIG_SEP_15 ", "

/* The C parameter of each kind.  */
#define GM_PROTO_GM_K_IN(N, T) const gm_ctype_##T *N
#define GM_PROTO_GM_K_OUT(N, T) gm_ctype_##T *N
#define GM_PROTO_GM_K_INOUT(N, T) gm_ctype_##T *N
#define GM_PROTO_GM_K_SCALAR(N, T) gm_ctype_##T N
#define GM_PP_PROTO_ONE(K, I, N, T, L) GM_SEP_##I GM_PROTO_##K (N, T)
#define GM_PP_PROTO_A(K, I, N, T, L) \
  GM_PP_CAT (GM_PP_PROTO_A_, GM_PP_CLASS_##K) (K, I, N, T, L)
#define GM_PP_PROTO_B(K, I, N, T, L) \
  GM_PP_CAT (GM_PP_PROTO_B_, GM_PP_CLASS_##K) (K, I, N, T, L)
#define GM_PP_PROTO_A_GO(K, I, N, T, L) GM_PP_PROTO_ONE (K, I, N, T, L) GM_PP_PROTO_B
#define GM_PP_PROTO_B_GO(K, I, N, T, L) GM_PP_PROTO_ONE (K, I, N, T, L) GM_PP_PROTO_A
#define GM_PP_PROTO_A_STOP(K, I, N, T, L)
#define GM_PP_PROTO_B_STOP(K, I, N, T, L)
#define GM_PP_PROTO(S) GM_PP_PROTO_A S (GM_K_STOP, 0, _, _, "")

/* The argument of each kind, unpacked from ARGS.  */
#define GM_ARG_FIELD_int8 i8
#define GM_ARG_FIELD_int16 i16
#define GM_ARG_FIELD_int32 i32
#define GM_ARG_FIELD_int64 i64
#define GM_ARG_FIELD_uint8 u8
#define GM_ARG_FIELD_uint16 u16
#define GM_ARG_FIELD_uint32 u32
#define GM_ARG_FIELD_uint64 u64
#define GM_ARG_FIELD_float32 f32
#define GM_ARG_FIELD_float64 f64
#define GM_ARG_GM_K_IN(I, T) (const gm_ctype_##T *) args[I].ptr
#define GM_ARG_GM_K_OUT(I, T) (gm_ctype_##T *) args[I].ptr
#define GM_ARG_GM_K_INOUT(I, T) (gm_ctype_##T *) args[I].ptr
#define GM_ARG_GM_K_SCALAR(I, T) args[I].GM_ARG_FIELD_##T
#define GM_PP_ARGS_ONE(K, I, N, T, L) GM_SEP_##I GM_ARG_##K (I, T)
#define GM_PP_ARGS_A(K, I, N, T, L) \
  GM_PP_CAT (GM_PP_ARGS_A_, GM_PP_CLASS_##K) (K, I, N, T, L)
#define GM_PP_ARGS_B(K, I, N, T, L) \
  GM_PP_CAT (GM_PP_ARGS_B_, GM_PP_CLASS_##K) (K, I, N, T, L)
#define GM_PP_ARGS_A_GO(K, I, N, T, L) GM_PP_ARGS_ONE (K, I, N, T, L) GM_PP_ARGS_B
#define GM_PP_ARGS_B_GO(K, I, N, T, L) GM_PP_ARGS_ONE (K, I, N, T, L) GM_PP_ARGS_A
#define GM_PP_ARGS_A_STOP(K, I, N, T, L)
#define GM_PP_ARGS_B_STOP(K, I, N, T, L)
#define GM_PP_ARGS(S) GM_PP_ARGS_A S (GM_K_STOP, 0, _, _, "")

/* The signature text of each kind.  */
#define GM_SIG_GM_K_IN(N, T, L) "in " #T " *" #N "[" L "]"
#define GM_SIG_GM_K_OUT(N, T, L) "out " #T " *" #N "[" L "]"
#define GM_SIG_GM_K_INOUT(N, T, L) "inout " #T " *" #N "[" L "]"
#define GM_SIG_GM_K_SCALAR(N, T, L) #T " " #N
#define GM_PP_SIG_ONE(K, I, N, T, L) GM_SIG_SEP_##I GM_SIG_##K (N, T, L)
#define GM_PP_SIG_A(K, I, N, T, L) \
  GM_PP_CAT (GM_PP_SIG_A_, GM_PP_CLASS_##K) (K, I, N, T, L)
#define GM_PP_SIG_B(K, I, N, T, L) \
  GM_PP_CAT (GM_PP_SIG_B_, GM_PP_CLASS_##K) (K, I, N, T, L)
#define GM_PP_SIG_A_GO(K, I, N, T, L) GM_PP_SIG_ONE (K, I, N, T, L) GM_PP_SIG_B
#define GM_PP_SIG_B_GO(K, I, N, T, L) GM_PP_SIG_ONE (K, I, N, T, L) GM_PP_SIG_A
#define GM_PP_SIG_A_STOP(K, I, N, T, L)
#define GM_PP_SIG_B_STOP(K, I, N, T, L)
#define GM_PP_SIG(S) GM_PP_SIG_A S (GM_K_STOP, 0, _, _, "")

#ifdef __cplusplus
#define GM_PLUGIN_EXTERN_C extern "C"
#else
#define GM_PLUGIN_EXTERN_C extern
#endif
#define GM_PLUGIN_EXPORT __attribute__ ((visibility ("default")))

/* The common part: the C reference's prototype when REF, its adapter,
   and the table entry gm_plugin_kernel_NAME.  */
#define GM_PLUGIN_ENTRY_(NAME, DOC, PARAMS, LAUNCH, REF)                  \
  static const gm_plugin_kernel gm_plugin_kernel_##NAME = {              \
    #NAME, DOC, GM_PP_SIG (PARAMS), LAUNCH, REF                          \
  };
#define GM_PLUGIN_REF_(NAME, PARAMS)                                      \
  GM_PLUGIN_EXTERN_C void gm_ref_##NAME (GM_PP_PROTO (PARAMS));          \
  static void gm_plugin_ref_##NAME (const gm_arg *args)                  \
  {                                                                      \
    gm_ref_##NAME (GM_PP_ARGS (PARAMS));                                 \
  }

/* A kernel with only a C reference, void gm_ref_NAME (PARAMS...): runs
   on the host backend only.  Plain C; no CUDA needed.  */
#define GM_PLUGIN_KERNEL_HOST(NAME, DOC, PARAMS)                          \
  GM_PLUGIN_REF_ (NAME, PARAMS)                                          \
  GM_PLUGIN_ENTRY_ (NAME, DOC, PARAMS, NULL, gm_plugin_ref_##NAME)

#if defined (__CUDACC__) || defined (__CUDA_RUNTIME_API_H__)
#ifndef __CUDACC__
#include <cuda_runtime_api.h>
#endif
#define GM_PLUGIN_LAUNCH_(NAME, PARAMS)                                   \
  GM_PLUGIN_EXTERN_C cudaError_t gm_kernel_##NAME (GM_PP_PROTO (PARAMS), \
                                                   const gm_launch_cfg *cfg, \
                                                   cudaStream_t stream); \
  static int gm_plugin_launch_##NAME (const gm_arg *args,                \
                                      const gm_launch_cfg *cfg,          \
                                      void *stream)                      \
  {                                                                      \
    return (int) gm_kernel_##NAME (GM_PP_ARGS (PARAMS), cfg,             \
                                   (cudaStream_t) stream);               \
  }

/* A kernel with a CUDA launcher, cudaError_t gm_kernel_NAME (PARAMS...,
   const gm_launch_cfg *cfg, cudaStream_t stream), and a C reference,
   void gm_ref_NAME (PARAMS...).  A definition whose parameters differ
   from PARAMS is a compile error (C functions cannot be overloaded).  */
#define GM_PLUGIN_KERNEL(NAME, DOC, PARAMS)                               \
  GM_PLUGIN_LAUNCH_ (NAME, PARAMS)                                       \
  GM_PLUGIN_REF_ (NAME, PARAMS)                                          \
  GM_PLUGIN_ENTRY_ (NAME, DOC, PARAMS, gm_plugin_launch_##NAME,          \
                    gm_plugin_ref_##NAME)

/* A kernel with a CUDA launcher and no C reference: the host backend
   refuses it with a clear error.  */
#define GM_PLUGIN_KERNEL_CUDA(NAME, DOC, PARAMS)                          \
  GM_PLUGIN_LAUNCH_ (NAME, PARAMS)                                       \
  GM_PLUGIN_ENTRY_ (NAME, DOC, PARAMS, gm_plugin_launch_##NAME, NULL)

/* dim3 from gm_launch_shape's arrays, for the <<<grid, block>>> of a
   launcher.  */
#define GM_DIM3(a) dim3 ((a)[0], (a)[1], (a)[2])
#endif

/* GM_PLUGIN_TABLE (NAME, ...): defines the exported gm_plugin_table ()
   listing the kernels NAME, ... (up to 32) declared above.  */
#define GM_PP_NARG(...) GM_PP_NARG_(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
#define GM_PP_NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, N, ...) N
#define GM_PP_ENTRIES(...) GM_PP_CAT (GM_PP_ENTRIES_, GM_PP_NARG (__VA_ARGS__)) (__VA_ARGS__)
#define GM_PP_ENTRIES_1(K) &gm_plugin_kernel_##K
#define GM_PP_ENTRIES_2(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_1 (__VA_ARGS__)
#define GM_PP_ENTRIES_3(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_2 (__VA_ARGS__)
#define GM_PP_ENTRIES_4(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_3 (__VA_ARGS__)
#define GM_PP_ENTRIES_5(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_4 (__VA_ARGS__)
#define GM_PP_ENTRIES_6(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_5 (__VA_ARGS__)
#define GM_PP_ENTRIES_7(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_6 (__VA_ARGS__)
#define GM_PP_ENTRIES_8(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_7 (__VA_ARGS__)
#define GM_PP_ENTRIES_9(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_8 (__VA_ARGS__)
#define GM_PP_ENTRIES_10(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_9 (__VA_ARGS__)
#define GM_PP_ENTRIES_11(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_10 (__VA_ARGS__)
#define GM_PP_ENTRIES_12(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_11 (__VA_ARGS__)
#define GM_PP_ENTRIES_13(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_12 (__VA_ARGS__)
#define GM_PP_ENTRIES_14(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_13 (__VA_ARGS__)
#define GM_PP_ENTRIES_15(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_14 (__VA_ARGS__)
#define GM_PP_ENTRIES_16(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_15 (__VA_ARGS__)
#define GM_PP_ENTRIES_17(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_16 (__VA_ARGS__)
#define GM_PP_ENTRIES_18(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_17 (__VA_ARGS__)
#define GM_PP_ENTRIES_19(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_18 (__VA_ARGS__)
#define GM_PP_ENTRIES_20(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_19 (__VA_ARGS__)
#define GM_PP_ENTRIES_21(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_20 (__VA_ARGS__)
#define GM_PP_ENTRIES_22(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_21 (__VA_ARGS__)
#define GM_PP_ENTRIES_23(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_22 (__VA_ARGS__)
#define GM_PP_ENTRIES_24(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_23 (__VA_ARGS__)
#define GM_PP_ENTRIES_25(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_24 (__VA_ARGS__)
#define GM_PP_ENTRIES_26(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_25 (__VA_ARGS__)
#define GM_PP_ENTRIES_27(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_26 (__VA_ARGS__)
#define GM_PP_ENTRIES_28(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_27 (__VA_ARGS__)
#define GM_PP_ENTRIES_29(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_28 (__VA_ARGS__)
#define GM_PP_ENTRIES_30(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_29 (__VA_ARGS__)
#define GM_PP_ENTRIES_31(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_30 (__VA_ARGS__)
#define GM_PP_ENTRIES_32(K, ...) &gm_plugin_kernel_##K, GM_PP_ENTRIES_31 (__VA_ARGS__)
#define GM_PLUGIN_TABLE(...)                                              \
  GM_PLUGIN_EXTERN_C GM_PLUGIN_EXPORT const gm_plugin_info *              \
  gm_plugin_table (void);                                                \
  const gm_plugin_info *                                                 \
  gm_plugin_table (void)                                                 \
  {                                                                      \
    static const gm_plugin_kernel *const gm_plugin_kernels_[] = {        \
      GM_PP_ENTRIES (__VA_ARGS__)                                        \
    };                                                                   \
    static const gm_plugin_info gm_plugin_info_ = {                      \
      GM_PLUGIN_ABI,                                                     \
      (uint32_t) (sizeof gm_plugin_kernels_ / sizeof gm_plugin_kernels_[0]), \
      gm_plugin_kernels_                                                 \
    };                                                                   \
    return &gm_plugin_info_;                                             \
  }

#endif /* GPUMEM_KERNEL_H */
