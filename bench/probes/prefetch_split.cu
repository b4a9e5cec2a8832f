// prefetch_split.cu -- whether the migration of managed memory to the
// host (issue 51's target: prefetch of 1 GiB back at >= 0.9x a pinned
// copy; gpumem and raw C's one cudaMemPrefetchAsync both reach ~0.25x)
// goes faster split: the 1 GiB in 1, 4, 16 or 64 pieces over 1, 4 or 8
// non-blocking streams, and as one cudaMemPrefetchBatchAsync of the
// pieces; the same splits to the device; a pinned cudaMemcpy of 1 GiB
// each way beside them.  Memory from a stream-ordered managed pool, as
// gpumem's, and from cudaMallocManaged.  Medians of 5, GB/s (10^9).
// Not part of make bench; by hand on a GPU machine:
//
//   nvcc -O2 -std=c++17 -o prefetch_split bench/probes/prefetch_split.cu
//   ./prefetch_split
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>
#include <vector>

#define CHECK(call)                                                        \
  do {                                                                     \
    cudaError_t err_ = (call);                                             \
    if (err_ != cudaSuccess) {                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
              cudaGetErrorString(err_));                                   \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static const size_t BYTES = (size_t)1 << 30;

static double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static cudaMemLocation where(bool host) {
  cudaMemLocation loc = {};
  loc.type = host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  loc.id = 0;
  return loc;
}

// GB/s of moving P's BYTES to HOST (else the device) in PIECES over
// NSTREAMS streams (BATCH: one batch call on the first stream), after
// moving it to the other side first.
static double move(char *p, bool host, int pieces, int nstreams, bool batch,
                   std::vector<cudaStream_t> &streams) {
  size_t piece = BYTES / pieces;
  std::vector<double> rates;
  for (int rep = 0; rep < 5; rep++) {
    CHECK(cudaMemPrefetchAsync(p, BYTES, where(!host), 0, streams[0]));
    CHECK(cudaDeviceSynchronize());
    double t0 = now_s();
    if (batch) {
      std::vector<void *> ptrs(pieces);
      std::vector<size_t> sizes(pieces);
      for (int i = 0; i < pieces; i++) {
        ptrs[i] = p + i * piece;
        sizes[i] = piece;
      }
      cudaMemLocation loc = where(host);
      size_t index = 0;
      CHECK(cudaMemPrefetchBatchAsync(ptrs.data(), sizes.data(), pieces,
                                      &loc, &index, 1, 0, streams[0]));
    } else {
      for (int i = 0; i < pieces; i++)
        CHECK(cudaMemPrefetchAsync(p + i * piece, piece, where(host), 0,
                                   streams[i % nstreams]));
    }
    CHECK(cudaDeviceSynchronize());
    rates.push_back(BYTES / (now_s() - t0) / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

static void table(const char *what, char *p, std::vector<cudaStream_t> &s) {
  printf("\n%s\n| pieces | streams | to the host | to the device |\n"
         "| ---: | ---: | ---: | ---: |\n", what);
  for (int pieces : {1, 4, 16, 64})
    for (int nstreams : {1, 4, 8}) {
      if (pieces == 1 && nstreams > 1) continue;
      if (nstreams > pieces) continue;
      printf("| %d | %d | %.1f | %.1f |\n", pieces, nstreams,
             move(p, true, pieces, nstreams, false, s),
             move(p, false, pieces, nstreams, false, s));
    }
  for (int pieces : {4, 16, 64})
    printf("| %d, one batch call | 1 | %.1f | %.1f |\n", pieces,
           move(p, true, pieces, 1, true, s),
           move(p, false, pieces, 1, true, s));
}

int main() {
  CHECK(cudaSetDevice(0));
  std::vector<cudaStream_t> streams(8);
  for (auto &s : streams)
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // The pinned copies of 1 GiB, the reference.
  char *dev, *pinned;
  CHECK(cudaMalloc(&dev, BYTES));
  CHECK(cudaMallocHost(&pinned, BYTES));
  double rate[2];
  for (int dir = 0; dir < 2; dir++) {
    std::vector<double> r;
    for (int rep = 0; rep < 5; rep++) {
      double t0 = now_s();
      CHECK(dir ? cudaMemcpy(pinned, dev, BYTES, cudaMemcpyDeviceToHost)
                : cudaMemcpy(dev, pinned, BYTES, cudaMemcpyHostToDevice));
      r.push_back(BYTES / (now_s() - t0) / 1e9);
    }
    std::sort(r.begin(), r.end());
    rate[dir] = r[2];
  }
  printf("pinned cudaMemcpy of 1 GiB: %.1f GB/s to the device, %.1f to the "
         "host\n", rate[0], rate[1]);
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(pinned));

  // A stream-ordered pool of managed memory, as gpumem's.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypeManaged;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  CHECK(cudaMemPoolCreate(&pool, &props));
  char *managed;
  CHECK(cudaMallocFromPoolAsync((void **)&managed, BYTES, pool, streams[0]));
  CHECK(cudaMemsetAsync(managed, 1, BYTES, streams[0]));
  CHECK(cudaDeviceSynchronize());
  table("managed pool (cudaMemPoolCreate, cudaMemAllocationTypeManaged)",
        managed, streams);
  CHECK(cudaFreeAsync(managed, streams[0]));
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMallocManaged(&managed, BYTES));
  CHECK(cudaMemset(managed, 1, BYTES));
  CHECK(cudaDeviceSynchronize());
  table("cudaMallocManaged", managed, streams);
  CHECK(cudaFree(managed));
  return 0;
}
