/* algo.cu -- the reference workload's kernel, made parallel.

   PARTIAL_UPDATE[k] = mean (IMAGES[0:N]) + UPDATE[k] for k < 4, where N
   is NUMBER_OF_IMAGES; with no images (N <= 0) the mean is taken as 0,
   so PARTIAL_UPDATE[k] = UPDATE[k].  Each output is computed in double
   and rounded once:

     PARTIAL_UPDATE[k] = (float) (S / N + (double) UPDATE[k]),
     S = sum of (double) IMAGES[i] over i < N,

   exactly as gm_ref_algo (algo-ref.c) does; only the order in which S
   is added up differs.

   Method.  One pass over IMAGES in one launch.  Every thread runs a
   grid-stride loop over the 16-byte aligned body of IMAGES with float4
   loads, ALGO_UNROLL of them issued before the first is used, so that
   enough bytes are in flight to cover the memory latency; the at most
   3 elements before the first 16-byte boundary (IMAGES may be a view
   at any float offset) and the at most 3 after the last are added by
   the first threads of the grid.  Every element is converted to double
   and added into a double per thread.  A block adds its threads'
   sums with warp shuffles and one shared-memory step; every block
   stores its sum, and the last block to finish (a fenced atomic
   counter) adds the block sums in a fixed order and writes the 4
   outputs.  For small N (at most ALGO_ONE_BLOCK_MAX elements, chosen
   by the launcher) one block does everything and needs no scratch
   memory.  The summation order depends only on N, the alignment of
   IMAGES and the launch shape, so repeated calls give identical bits.

   Scratch.  The block sums and the counter (8 bytes a block, plus 8)
   belong to the stream: the launcher keeps one scratch area for each
   (device, stream) pair it has launched on, made at first need with
   cudaMallocAsync on that stream and zeroed once (see algo_scratch).
   The last block sets the counter back to 0 when it has read the block
   sums, so the next launch on the same stream finds it ready: a launch
   costs no allocation and no memset, and launches on one stream, which
   run one after another, are the only ones that share an area.  A
   launch on a stream that is being captured into a graph, or when the
   table of streams is full, takes scratch of its own from the pool
   instead (cudaMallocAsync, a memset of the counter, cudaFreeAsync
   behind the kernel), as every launch did before, so a captured graph
   owns its scratch.  Either way the kernel and its summation order are
   the same, so the result's bits do not depend on where the scratch
   came from.

   Error bound.  Every element enters S exactly (float to double is
   exact), then passes through at most D double additions: two inside
   its float4, its thread's running sum (one addition per float4 or
   head/tail element the thread reads), the warp and block trees (5 +
   5), the last block's loop over the block sums, and its trees (5 +
   5).  With T threads in G blocks of B, D <= N / (4 T) + G / B + 25;
   with the launcher's own shape and N = 2^28 on 132 SMs, D is about
   520.  The usual bound for recursive summation gives
     |S_computed - S| <= D * 2^-53 * sum |IMAGES[i]|  (to first order),
   so the mean is off by at most D * 2^-53 * mean |IMAGES[i]|, 6e-14
   of it for N = 2^28.  The reference's sequential sum has D = N - 1.
   Both are then rounded once to float, so
     |device - reference| <= (D + N) * 2^-53 * mean |IMAGES[i]|
                             + one unit in the last place of the result,
   and in practice (errors that grow like sqrt (D), not D) the two agree
   to the last bit except where the exact result lies next to a
   rounding boundary of float.

   Launch shape.  With CFG->grid[0] == 0 the launcher chooses: for N <=
   ALGO_ONE_BLOCK_MAX one block of min (1024, max threads per block);
   otherwise blocks of min (ALGO_BLOCK, max threads per block) threads,
   and min (ALGO_BLOCKS_PER_SM * SM count, blocks that give every
   thread at least ALGO_UNROLL float4s) of them.  ALGO_BLOCKS_PER_SM *
   ALGO_BLOCK = 1024 threads per SM with ALGO_UNROLL * 16 = 128 bytes
   each in flight is 128 KiB per SM, some 3 times the H200's
   bandwidth-latency product per SM (4.8 TB/s x about 1 us / 132 SMs =
   36 KiB).  The kernel's register budget is set to match: with
   __launch_bounds__ (1024, 1) ptxas may use 64 registers, and needs
   them to keep all ALGO_UNROLL loads in flight (aiming at 32, it issues
   them two at a time); 64 registers a thread allow exactly 1024
   threads per SM.  Otherwise CFG->grid and
   CFG->block are used as given, in up to three dimensions: any block
   of 1 to 1024 threads works, not only multiples of 32; a grid of one
   block needs no scratch.  */

#include "kernels.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

enum
{
  ALGO_UNROLL = 8,          /* float4 loads in flight per thread */
  ALGO_BLOCK = 256,         /* threads per block, launcher's choice */
  ALGO_BLOCKS_PER_SM = 4,   /* blocks per SM, launcher's choice */
  ALGO_WARP = 32,
  ALGO_MAX_WARPS = 1024 / ALGO_WARP,
  ALGO_MAX_THREADS = 1024
};

/* Up to this many images, one block and no scratch: one SM reads 256
   KiB in a few microseconds, about what the allocation, the memset and
   the cross-block step of the many-block path cost (an estimate, not a
   measurement).  */
#define ALGO_ONE_BLOCK_MAX ((int64_t) 1 << 16)

/* The calling thread's index in its block, counting x fastest, then y,
   then z: the order in which CUDA forms warps.  */
static __device__ __forceinline__ unsigned int
thread_in_block (void)
{
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

static __device__ __forceinline__ uint64_t
block_in_grid (void)
{
  return blockIdx.x
         + (uint64_t) gridDim.x * (blockIdx.y + (uint64_t) gridDim.y * blockIdx.z);
}

/* Sum of VALUE over the LANES lowest lanes of the calling warp, which
   are all the lanes that exist in it; valid in lane 0.  Lanes past
   LANES exist only in a last warp cut short by a block size that is
   not a multiple of 32; they are left out of the mask and their
   shuffled values are never used.  */
static __device__ __forceinline__ double
warp_sum (double value, unsigned int lane, unsigned int lanes)
{
  unsigned int mask = lanes >= ALGO_WARP ? 0xffffffffu : (1u << lanes) - 1u;

  for (unsigned int offset = ALGO_WARP / 2; offset > 0; offset /= 2)
    {
      double other = __shfl_down_sync (mask, value, offset);
      if (lane + offset < lanes)
        value += other;
    }
  return value;
}

/* Sum of VALUE over the THREADS threads of the block; valid in thread
   0.  Every thread of the block must call it, and a block calling it
   twice must pass a __syncthreads between the calls (warp 0 reads
   WARP_SUMS after the barrier here).  */
static __device__ double
block_sum (double value, unsigned int thread, unsigned int threads)
{
  __shared__ double warp_sums[ALGO_MAX_WARPS];
  unsigned int lane = thread % ALGO_WARP;
  unsigned int warp = thread / ALGO_WARP;
  unsigned int lanes = threads - warp * ALGO_WARP;
  double total = 0.0;

  if (lanes > ALGO_WARP)
    lanes = ALGO_WARP;
  value = warp_sum (value, lane, lanes);
  if (lane == 0)
    warp_sums[warp] = value;
  __syncthreads ();
  if (warp == 0)
    {
      /* Warp 0 has min (32, THREADS) lanes, never fewer than there
         are warps.  */
      unsigned int warps = (threads + ALGO_WARP - 1) / ALGO_WARP;
      total = warp_sum (lane < warps ? warp_sums[lane] : 0.0, lane, lanes);
    }
  return total;
}

static __device__ void
write_result (double sum, int64_t number_of_images, const float *update,
              float *partial_update)
{
  double mean = number_of_images > 0 ? sum / (double) number_of_images : 0.0;

  for (int k = 0; k < 4; k++)
    partial_update[k] = (float) (mean + (double) update[k]);
}

/* COUNTER and BLOCK_SUMS are the scratch memory, both NULL when the
   grid is one block.  No __restrict__: a script may pass overlapping
   arrays, and the outputs are written only after every block has read
   all it reads, so that works; __ldg asks for the read-only path
   explicitly instead.  */
static __global__ void __launch_bounds__ (ALGO_MAX_THREADS, 1)
algo_kernel (const float *images, const float *update, float *partial_update,
             int64_t number_of_images,
             unsigned long long *counter, double *block_sums)
{
  __shared__ bool is_last_block;
  unsigned int thread = thread_in_block ();
  unsigned int threads = blockDim.x * blockDim.y * blockDim.z;
  uint64_t block = block_in_grid ();
  uint64_t blocks = (uint64_t) gridDim.x * gridDim.y * gridDim.z;
  uint64_t global = block * threads + thread;
  uint64_t stride = blocks * threads;
  double sum = 0.0;

  if (number_of_images > 0)
    {
      uint64_t count = (uint64_t) number_of_images;
      uint64_t head = ((16 - ((uintptr_t) images & 15)) & 15) / sizeof (float);
      if (head > count)
        head = count;
      uint64_t vectors = (count - head) / 4;
      uint64_t tail = (count - head) % 4;
      const float4 *body = (const float4 *) (images + head);
      const float *rest = images + head + 4 * vectors;

      /* Loops, not ifs: a grid may have fewer than 3 threads.  */
      for (uint64_t j = global; j < head; j += stride)
        sum += (double) images[j];
      for (uint64_t j = global; j < tail; j += stride)
        sum += (double) rest[j];

      uint64_t i = global;
      for (; i + (ALGO_UNROLL - 1) * stride < vectors; i += ALGO_UNROLL * stride)
        {
          float4 v[ALGO_UNROLL];
#pragma unroll
          for (int u = 0; u < ALGO_UNROLL; u++)
            v[u] = __ldg (body + i + u * stride);
#pragma unroll
          for (int u = 0; u < ALGO_UNROLL; u++)
            sum += ((double) v[u].x + (double) v[u].y)
                   + ((double) v[u].z + (double) v[u].w);
        }
      for (; i < vectors; i += stride)
        {
          float4 v = __ldg (body + i);
          sum += ((double) v.x + (double) v.y) + ((double) v.z + (double) v.w);
        }
    }

  sum = block_sum (sum, thread, threads);

  if (block_sums == NULL)
    {
      if (thread == 0)
        write_result (sum, number_of_images, update, partial_update);
      return;
    }

  if (thread == 0)
    {
      block_sums[block] = sum;
      /* Publish the block sum before counting this block as done, and
         in the last block, order the reads of every other block's sum
         after the count that proved them written.  */
      __threadfence ();
      is_last_block = atomicAdd (counter, 1ull) == blocks - 1;
      if (is_last_block)
        __threadfence ();
    }
  __syncthreads ();
  if (!is_last_block)
    return;

  double total = 0.0;
  for (uint64_t b = thread; b < blocks; b += threads)
    /* Through L2: this SM's L1 is not coherent with other blocks'
       stores.  */
    total += __ldcg (block_sums + b);
  total = block_sum (total, thread, threads);
  if (thread == 0)
    {
      write_result (total, number_of_images, update, partial_update);
      /* Every block has counted itself, so nothing adds to the counter
         any more in this launch: ready for the next launch on this
         stream (the kernel's end orders this store before it).  */
      *counter = 0;
    }
}

/* The streams' scratch areas (see "Scratch" at the top): at most
   ALGO_SCRATCH_STREAMS (device, stream) pairs, each with an area of
   room for BLOCKS block sums after its counter.  Streams are told apart
   by cudaStreamGetId, which never gives a destroyed stream's number to
   a new one, so an area is never shared by streams that can run at the
   same time.  An area of a destroyed stream stays until the backend
   shuts down (ALGO_SCRATCH_STREAMS areas of a few KiB at most), which
   gives every area back through gm_kernels_release.  */
enum
{
  ALGO_SCRATCH_STREAMS = 64,
  ALGO_SCRATCH_MIN_BLOCKS = 1024
};

typedef struct algo_scratch_slot
{
  int device;
  unsigned long long stream_id;
  uint64_t blocks;              /* room for this many block sums */
  unsigned long long *counter;  /* the area: counter, then block sums */
} algo_scratch_slot;

static algo_scratch_slot algo_scratch_slots[ALGO_SCRATCH_STREAMS];
static int algo_scratch_used;
static pthread_mutex_t algo_scratch_lock = PTHREAD_MUTEX_INITIALIZER;

/* Sets *COUNTER to STREAM's scratch area on the current device, with
   room for BLOCKS block sums and the counter at 0 when the work queued
   on STREAM so far is done; makes or grows the area in stream order on
   STREAM when needed.  Sets *COUNTER to NULL, returning cudaSuccess,
   when the launch must bring its own scratch: STREAM is being captured,
   or the table is full.  Fails with the error of a CUDA call, leaving
   CUDA's last error clear.  Thread-safe.  */
static cudaError_t
algo_scratch (cudaStream_t stream, uint64_t blocks,
              unsigned long long **counter)
{
  cudaStreamCaptureStatus capture;
  unsigned long long stream_id;
  algo_scratch_slot *slot = NULL;
  int device;
  cudaError_t err;

  *counter = NULL;
  err = cudaStreamIsCapturing (stream, &capture);
  if (err == cudaSuccess && capture != cudaStreamCaptureStatusNone)
    return cudaSuccess;
  if (err == cudaSuccess)
    err = cudaGetDevice (&device);
  if (err == cudaSuccess)
    err = cudaStreamGetId (stream, &stream_id);
  if (err != cudaSuccess)
    {
      (void) cudaGetLastError ();
      return err;
    }

  pthread_mutex_lock (&algo_scratch_lock);
  for (int i = 0; i < algo_scratch_used; i++)
    if (algo_scratch_slots[i].stream_id == stream_id
        && algo_scratch_slots[i].device == device)
      {
        slot = &algo_scratch_slots[i];
        break;
      }
  if (slot == NULL && algo_scratch_used < ALGO_SCRATCH_STREAMS)
    {
      slot = &algo_scratch_slots[algo_scratch_used];
      slot->device = device;
      slot->stream_id = stream_id;
      slot->blocks = 0;
      slot->counter = NULL;
      algo_scratch_used++;
    }
  if (slot != NULL && slot->blocks < blocks)
    {
      /* Make it, or make it larger: in STREAM's order, after the
         launches that used the old area, before the one that asks.  */
      uint64_t room = blocks > ALGO_SCRATCH_MIN_BLOCKS
                      ? blocks : ALGO_SCRATCH_MIN_BLOCKS;
      void *area = NULL;

      err = cudaMallocAsync (&area, sizeof (unsigned long long)
                                    + room * sizeof (double), stream);
      if (err == cudaSuccess)
        {
          err = cudaMemsetAsync (area, 0, sizeof (unsigned long long),
                                 stream);
          if (err != cudaSuccess)
            (void) cudaFreeAsync (area, stream);
        }
      if (err == cudaSuccess && slot->counter != NULL)
        (void) cudaFreeAsync (slot->counter, stream);
      if (err == cudaSuccess)
        {
          slot->counter = (unsigned long long *) area;
          slot->blocks = room;
        }
      else
        (void) cudaGetLastError ();
    }
  if (err == cudaSuccess && slot != NULL)
    *counter = slot->counter;
  pthread_mutex_unlock (&algo_scratch_lock);
  return err;
}

/* Frees the scratch areas of DEVICE, the current device, and forgets
   their slots; the caller has waited for DEVICE's work, so no launch
   still uses them.  The frees go on the legacy default stream and are
   waited for, so that the pool holds the memory again on return (and a
   trim can give it back to the device).  Errors are cleared and
   ignored: this runs at shutdown, where nothing could act on them.
   Thread-safe.  */
void
gm_kernel_algo_release (int device)
{
  bool freed = false;
  int kept = 0;

  pthread_mutex_lock (&algo_scratch_lock);
  for (int i = 0; i < algo_scratch_used; i++)
    {
      algo_scratch_slot *slot = &algo_scratch_slots[i];

      if (slot->device != device)
        {
          algo_scratch_slots[kept++] = *slot;
          continue;
        }
      if (slot->counter != NULL
          && cudaFreeAsync (slot->counter, cudaStreamLegacy) == cudaSuccess)
        freed = true;
    }
  algo_scratch_used = kept;
  pthread_mutex_unlock (&algo_scratch_lock);
  if (freed)
    (void) cudaStreamSynchronize (cudaStreamLegacy);
  (void) cudaGetLastError ();
}

/* Enqueue on STREAM, on the current device, the computation of
   PARTIAL_UPDATE[k] = mean (IMAGES[0:NUMBER_OF_IMAGES]) + UPDATE[k] for
   k < 4 (see the top of this file), shaped by CFG as described there;
   CFG may be NULL, meaning the launcher chooses.  IMAGES must be
   4-byte aligned, as every float array is; it may start at any float
   offset.  Returns cudaSuccess once the work is enqueued; a kernel
   fault shows later, at synchronization.  Fails, leaving CUDA's last
   error clear, with the error of the stream-ordered allocation of the
   scratch memory (cudaErrorMemoryAllocation; STREAM's area is made on
   its first multi-block launch, other launches allocate nothing unless
   STREAM is being captured or the table of streams is full), of the
   launch, or cudaErrorInvalidConfiguration for a grid or block of no
   threads or of more than GM_MAX_BLOCKS blocks; scratch of a launch's
   own is freed in stream order whatever happens.  */
cudaError_t
gm_kernel_algo (const float *images, const float *update,
                float *partial_update, int64_t number_of_images,
                const gm_launch_cfg *cfg, cudaStream_t stream)
{
  bool one_block = number_of_images <= ALGO_ONE_BLOCK_MAX;
  /* What one thread reads: everything for one block, else ALGO_UNROLL
     float4s.  */
  uint64_t units = one_block ? 1
                   : ((uint64_t) number_of_images + ALGO_UNROLL * 4 - 1)
                     / (ALGO_UNROLL * 4);
  unsigned int grid_xyz[3], block_xyz[3];
  cudaError_t err, free_err;
  void *scratch;

  if (gm_launch_shape (cfg, units, one_block ? ALGO_MAX_THREADS : ALGO_BLOCK,
                       one_block ? 0 : ALGO_BLOCKS_PER_SM, grid_xyz,
                       block_xyz) != 0)
    return cudaErrorInvalidConfiguration;
  dim3 grid = GM_DIM3 (grid_xyz), block = GM_DIM3 (block_xyz);
  uint64_t blocks = (uint64_t) grid.x * grid.y * grid.z;

  if (blocks == 1)
    {
      algo_kernel<<<grid, block, 0, stream>>> (images, update, partial_update,
                                               number_of_images, NULL, NULL);
      return cudaGetLastError ();
    }

  unsigned long long *own;
  err = algo_scratch (stream, blocks, &own);
  if (err != cudaSuccess)
    return err;
  if (own != NULL)
    {
      algo_kernel<<<grid, block, 0, stream>>> (images, update, partial_update,
                                               number_of_images, own,
                                               (double *) (own + 1));
      return cudaGetLastError ();
    }

  /* The counter first, so that the doubles after it stay 8-byte
     aligned.  */
  size_t bytes = sizeof (unsigned long long) + blocks * sizeof (double);
  err = cudaMallocAsync (&scratch, bytes, stream);
  if (err != cudaSuccess)
    {
      (void) cudaGetLastError ();
      return err;
    }
  unsigned long long *counter = (unsigned long long *) scratch;
  double *block_sums = (double *) (counter + 1);

  err = cudaMemsetAsync (counter, 0, sizeof *counter, stream);
  if (err == cudaSuccess)
    {
      algo_kernel<<<grid, block, 0, stream>>> (images, update, partial_update,
                                               number_of_images, counter,
                                               block_sums);
      err = cudaGetLastError ();
    }
  else
    (void) cudaGetLastError ();

  free_err = cudaFreeAsync (scratch, stream);
  if (free_err != cudaSuccess)
    {
      (void) cudaGetLastError ();
      if (err == cudaSuccess)
        err = free_err;
    }
  return err;
}
