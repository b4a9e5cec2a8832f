/* cuda-reduce.cu -- the CUDA backend's elementwise reduction of N arrays
   (gm.h's reduce; cuda-reduce.h's launcher): one grid-stride kernel,
   templated over the element type and the operation.

   Each element is combined from SRCS[0] to SRCS[N-1] in that order, as
   the host backend's loops (host-reduce.c) do, so that both give the
   same bits: integer sums wrap around as unsigned ones, bool is an or
   (sum, max) or an and (min) with 0 or 1 as result, max and min keep the
   earlier operand on ties and NaN (x = (y > x) ? y : x), complex numbers
   add by parts.  Float sums are plain adds, never contracted.

   Bandwidth: where DST and every source sit at the same offset from a
   16-byte boundary (buffers from the pool or another process's, at the
   same element), a thread moves 16 bytes of each array per step, every
   source's load issued before the first add; the elements before the
   first boundary (the head) and after the last whole 16 bytes (the tail)
   are taken one by one.  Elsewhere every step takes one element.  A
   thread reads all its sources' elements before it writes DST's, and no
   other thread touches them, so DST may be one of the sources.  */

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "cuda-reduce.h"

namespace
{

/* The dtypes that are not C++ numbers: bool as its byte, complex
   numbers as their two parts.  */
struct reduce_bool
{
  unsigned char v;
};

struct reduce_complex64
{
  float re, im;
};

struct reduce_complex128
{
  double re, im;
};

/* The accumulator's start from the first source's element: bool becomes
   0 or 1.  */
template <typename T>
__device__ __forceinline__ T
reduce_first (T x)
{
  return x;
}

__device__ __forceinline__ reduce_bool
reduce_first (reduce_bool x)
{
  return reduce_bool{(unsigned char) (x.v != 0)};
}

/* The operations: ACC OP B, ACC the earlier operand.  Float adds are
   the round-to-nearest intrinsics, which the compiler never fuses.  */
struct reduce_sum
{
  template <typename T>
  static __device__ __forceinline__ T
  apply (T acc, T b)
  {
    if constexpr (std::is_integral_v<T>)
      {
        using U = std::make_unsigned_t<T>;
        return (T) (U) ((U) acc + (U) b);
      }
    else if constexpr (std::is_same_v<T, float>)
      return __fadd_rn (acc, b);
    else
      return __dadd_rn (acc, b);
  }

  static __device__ __forceinline__ reduce_bool
  apply (reduce_bool acc, reduce_bool b)
  {
    return reduce_bool{(unsigned char) (acc.v || b.v)};
  }

  static __device__ __forceinline__ reduce_complex64
  apply (reduce_complex64 acc, reduce_complex64 b)
  {
    return reduce_complex64{__fadd_rn (acc.re, b.re),
                            __fadd_rn (acc.im, b.im)};
  }

  static __device__ __forceinline__ reduce_complex128
  apply (reduce_complex128 acc, reduce_complex128 b)
  {
    return reduce_complex128{__dadd_rn (acc.re, b.re),
                             __dadd_rn (acc.im, b.im)};
  }
};

struct reduce_max
{
  template <typename T>
  static __device__ __forceinline__ T
  apply (T acc, T b)
  {
    return b > acc ? b : acc;
  }

  static __device__ __forceinline__ reduce_bool
  apply (reduce_bool acc, reduce_bool b)
  {
    return reduce_bool{(unsigned char) (acc.v || b.v)};
  }
};

struct reduce_min
{
  template <typename T>
  static __device__ __forceinline__ T
  apply (T acc, T b)
  {
    return b < acc ? b : acc;
  }

  static __device__ __forceinline__ reduce_bool
  apply (reduce_bool acc, reduce_bool b)
  {
    return reduce_bool{(unsigned char) (acc.v && b.v)};
  }
};

/* What one thread takes of an array in one step: 16 bytes (WIDE, from
   a 16-byte boundary: one vector load) or one element.  */
template <typename T, bool WIDE> struct reduce_pack;

template <typename T> struct reduce_pack<T, true>
{
  static_assert (16 % sizeof (T) == 0, "elements tile 16 bytes");
  static constexpr int width = 16 / sizeof (T);
  union
  {
    uint4 raw;
    T e[width];
  };

  static __device__ __forceinline__ reduce_pack
  load (const void *base, size_t index)
  {
    reduce_pack pack;
    pack.raw = static_cast<const uint4 *> (base)[index];
    return pack;
  }

  __device__ __forceinline__ void
  store (void *base, size_t index) const
  {
    static_cast<uint4 *> (base)[index] = raw;
  }
};

template <typename T> struct reduce_pack<T, false>
{
  static constexpr int width = 1;
  T e[1];

  static __device__ __forceinline__ reduce_pack
  load (const void *base, size_t index)
  {
    reduce_pack pack;
    pack.e[0] = static_cast<const T *> (base)[index];
    return pack;
  }

  __device__ __forceinline__ void
  store (void *base, size_t index) const
  {
    static_cast<T *> (base)[index] = e[0];
  }
};

/* The kernel's arguments, passed by value: the arrays, and how the
   COUNT elements split into HEAD single elements, PACKS whole packs
   from element HEAD on, and TAIL single elements after them.  */
struct reduce_operands
{
  void *dst;
  const void *src[GM_REDUCE_MAX_INPUTS];
  int n;
  size_t head, packs, tail;
};

/* Element I of DST.  */
template <typename T, typename OP>
__device__ __forceinline__ void
reduce_element (const reduce_operands &a, size_t i)
{
  T acc = reduce_first (static_cast<const T *> (a.src[0])[i]);

#pragma unroll
  for (int k = 1; k < GM_REDUCE_MAX_INPUTS; k++)
    if (k < a.n)
      acc = OP::apply (acc, static_cast<const T *> (a.src[k])[i]);
  static_cast<T *> (a.dst)[i] = acc;
}

template <typename T, typename OP, bool WIDE>
__global__ void
reduce_kernel (const reduce_operands a)
{
  using pack = reduce_pack<T, WIDE>;
  const size_t first = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t) gridDim.x * blockDim.x;
  T *const dst = static_cast<T *> (a.dst) + a.head;

  for (size_t p = first; p < a.packs; p += stride)
    {
      pack in[GM_REDUCE_MAX_INPUTS];
      pack out;

      /* Every load first, so that they are in flight together.  */
#pragma unroll
      for (int k = 0; k < GM_REDUCE_MAX_INPUTS; k++)
        if (k < a.n)
          in[k] = pack::load (static_cast<const T *> (a.src[k]) + a.head, p);
#pragma unroll
      for (int e = 0; e < pack::width; e++)
        {
          T acc = reduce_first (in[0].e[e]);

#pragma unroll
          for (int k = 1; k < GM_REDUCE_MAX_INPUTS; k++)
            if (k < a.n)
              acc = OP::apply (acc, in[k].e[e]);
          out.e[e] = acc;
        }
      out.store (dst, p);
    }
  if (first < a.head)
    reduce_element<T, OP> (a, first);
  if (first < a.tail)
    reduce_element<T, OP> (a, a.head + a.packs * pack::width + first);
}

constexpr unsigned reduce_block = 256;
/* Blocks per multiprocessor: enough resident threads to keep the memory
   system busy; the grid strides over the rest.  */
constexpr unsigned reduce_blocks_per_sm = 8;

template <typename T, typename OP, bool WIDE>
cudaError_t
reduce_queue (const reduce_operands &a, int sm_count, cudaStream_t stream)
{
  size_t items = a.packs > a.head ? a.packs : a.head;
  size_t blocks, most;

  if (a.tail > items)
    items = a.tail;
  blocks = (items + reduce_block - 1) / reduce_block;
  most = (size_t) (sm_count > 0 ? sm_count : 128) * reduce_blocks_per_sm;
  if (blocks > most)
    blocks = most;
  reduce_kernel<T, OP, WIDE><<<(unsigned) blocks, reduce_block, 0, stream>>> (a);
  return cudaGetLastError ();
}

/* Splits the COUNT elements of A for T and queues the kernel: wide where
   every array sits at the same element-aligned offset from a 16-byte
   boundary.  */
template <typename T, typename OP>
cudaError_t
reduce_typed (reduce_operands a, size_t count, int sm_count,
              cudaStream_t stream)
{
  const uintptr_t offset = (uintptr_t) a.dst % 16;
  bool wide = offset % sizeof (T) == 0;

  for (int k = 0; k < a.n; k++)
    if ((uintptr_t) a.src[k] % 16 != offset)
      wide = false;
  if (wide)
    {
      const size_t width = reduce_pack<T, true>::width;
      size_t head = (16 - offset) % 16 / sizeof (T);

      if (head > count)
        head = count;
      a.head = head;
      a.packs = (count - head) / width;
      a.tail = (count - head) % width;
      return reduce_queue<T, OP, true> (a, sm_count, stream);
    }
  a.head = 0;
  a.packs = count;
  a.tail = 0;
  return reduce_queue<T, OP, false> (a, sm_count, stream);
}

template <typename T>
cudaError_t
reduce_ordered (gm_reduce_op op, const reduce_operands &a, size_t count,
                int sm_count, cudaStream_t stream)
{
  switch (op)
    {
    case GM_REDUCE_SUM:
      return reduce_typed<T, reduce_sum> (a, count, sm_count, stream);
    case GM_REDUCE_MAX:
      return reduce_typed<T, reduce_max> (a, count, sm_count, stream);
    case GM_REDUCE_MIN:
      return reduce_typed<T, reduce_min> (a, count, sm_count, stream);
    }
  return cudaErrorInvalidValue;
}

} // namespace

extern "C" int
gm_cuda_reduce_launch (void *dst, void *const *srcs, int n, size_t count,
                       gm_dtype dtype, gm_reduce_op op, int sm_count,
                       void *stream_handle)
{
  cudaStream_t stream = static_cast<cudaStream_t> (stream_handle);
  reduce_operands a = {};

  if (n < 1 || n > GM_REDUCE_MAX_INPUTS)
    return cudaErrorInvalidValue;
  if (count == 0)
    return cudaSuccess;
  a.dst = dst;
  a.n = n;
  for (int k = 0; k < n; k++)
    a.src[k] = srcs[k];
  switch (dtype)
    {
    case GM_BOOL:
      return reduce_ordered<reduce_bool> (op, a, count, sm_count, stream);
    case GM_INT8:
      return reduce_ordered<int8_t> (op, a, count, sm_count, stream);
    case GM_INT16:
      return reduce_ordered<int16_t> (op, a, count, sm_count, stream);
    case GM_INT32:
      return reduce_ordered<int32_t> (op, a, count, sm_count, stream);
    case GM_INT64:
      return reduce_ordered<int64_t> (op, a, count, sm_count, stream);
    case GM_UINT8:
      return reduce_ordered<uint8_t> (op, a, count, sm_count, stream);
    case GM_UINT16:
      return reduce_ordered<uint16_t> (op, a, count, sm_count, stream);
    case GM_UINT32:
      return reduce_ordered<uint32_t> (op, a, count, sm_count, stream);
    case GM_UINT64:
      return reduce_ordered<uint64_t> (op, a, count, sm_count, stream);
    case GM_FLOAT32:
      return reduce_ordered<float> (op, a, count, sm_count, stream);
    case GM_FLOAT64:
      return reduce_ordered<double> (op, a, count, sm_count, stream);
    case GM_COMPLEX64:
      if (op != GM_REDUCE_SUM)
        break;
      return reduce_typed<reduce_complex64, reduce_sum> (a, count, sm_count,
                                                         stream);
    case GM_COMPLEX128:
      if (op != GM_REDUCE_SUM)
        break;
      return reduce_typed<reduce_complex128, reduce_sum> (a, count, sm_count,
                                                          stream);
    case GM_FLOAT16:
    case GM_NDTYPES:
      break;
    }
  return cudaErrorInvalidValue;
}
