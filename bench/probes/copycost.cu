// copycost.cu -- a synchronous copy from or into page-locked memory and a
// synchronize, as raw C makes it (cudaMemcpy + cudaDeviceSynchronize)
// against gpumem's CUDA calls for it, piece by piece (bench/HISTORY.md,
// "Where a small copy's microseconds went").  Medians of 3000 calls after
// 100 warm-ups, microseconds.  Not part of make bench; by hand on a GPU
// machine:
//
//   nvcc -O2 -o copycost bench/probes/copycost.cu && ./copycost
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>
static double now_us() { timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3; }
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)
template <class F> static void bench(const char *name, size_t n, F f, int reps = 3000) {
  std::vector<double> t(reps);
  for (int i = 0; i < 100; i++) f();
  for (int i = 0; i < reps; i++) { double t0 = now_us(); f(); t[i] = now_us() - t0; }
  std::sort(t.begin(), t.end());
  printf("%8zu %-60s %8.2f us (p10 %.2f p90 %.2f)\n", n, name, t[reps / 2], t[reps / 10], t[reps * 9 / 10]);
}
static void spin_legacy() { while (cudaStreamQuery(cudaStreamLegacy) == cudaErrorNotReady) {} }
static void prewait() { int d; cudaGetDevice(&d); spin_legacy(); }
static void ptrattr(const void *p) { int d; cudaGetDevice(&d); cudaPointerAttributes a; if (cudaPointerGetAttributes(&a, p)) cudaGetLastError(); }
static void gsync() { prewait(); int d; cudaGetDevice(&d); cudaDeviceSynchronize(); }
int main() {
  CK(cudaSetDevice(0)); CK(cudaFree(0));
  size_t big = 4 << 20;
  char *dev, *pin; CK(cudaMalloc(&dev, big)); CK(cudaMallocHost(&pin, big)); memset(pin, 1, big);
  for (size_t n : {(size_t)1024, (size_t)4096, (size_t)65536, (size_t)1 << 20}) {
    for (int dir = 0; dir < 2; dir++) {
      void *d = dir ? (void *)pin : (void *)dev; const void *s = dir ? (void *)dev : (void *)pin;
      char nm[128];
      const char *D = dir ? "d2h" : "h2d";
      snprintf(nm, sizeof nm, "%s raw cudaMemcpy + DevSync", D); bench(nm, n, [&] { cudaMemcpy(d, s, n, cudaMemcpyDefault); cudaDeviceSynchronize(); });
      snprintf(nm, sizeof nm, "%s raw cudaMemcpy", D); bench(nm, n, [&] { cudaMemcpy(d, s, n, cudaMemcpyDefault); });
      snprintf(nm, sizeof nm, "%s gm full: prewait ptrattr Async StreamSync + gsync", D); bench(nm, n, [&] { prewait(); ptrattr(dir ? d : s); cudaMemcpyAsync(d, s, n, cudaMemcpyDefault, cudaStreamLegacy); cudaStreamSynchronize(cudaStreamLegacy); gsync(); });
      snprintf(nm, sizeof nm, "%s gm copy only: prewait ptrattr Async StreamSync", D); bench(nm, n, [&] { prewait(); ptrattr(dir ? d : s); cudaMemcpyAsync(d, s, n, cudaMemcpyDefault, cudaStreamLegacy); cudaStreamSynchronize(cudaStreamLegacy); });
      snprintf(nm, sizeof nm, "%s Async StreamSync", D); bench(nm, n, [&] { cudaMemcpyAsync(d, s, n, cudaMemcpyDefault, cudaStreamLegacy); cudaStreamSynchronize(cudaStreamLegacy); });
      snprintf(nm, sizeof nm, "%s Async spin", D); bench(nm, n, [&] { cudaMemcpyAsync(d, s, n, cudaMemcpyDefault, cudaStreamLegacy); spin_legacy(); });
      snprintf(nm, sizeof nm, "%s Async StreamSync + DevSync", D); bench(nm, n, [&] { cudaMemcpyAsync(d, s, n, cudaMemcpyDefault, cudaStreamLegacy); cudaStreamSynchronize(cudaStreamLegacy); cudaDeviceSynchronize(); });
      snprintf(nm, sizeof nm, "%s cudaMemcpy + gsync", D); bench(nm, n, [&] { cudaMemcpy(d, s, n, cudaMemcpyDefault); gsync(); });
      snprintf(nm, sizeof nm, "%s prewait ptrattr cudaMemcpy + gsync", D); bench(nm, n, [&] { prewait(); ptrattr(dir ? d : s); cudaMemcpy(d, s, n, cudaMemcpyDefault); gsync(); });
    }
  }
  bench("prewait alone", 0, [&] { prewait(); });
  bench("ptrattr pinned alone", 0, [&] { ptrattr(pin); });
  bench("gsync alone", 0, [&] { gsync(); });
  bench("cudaDeviceSynchronize alone", 0, [&] { cudaDeviceSynchronize(); });
  return 0;
}
