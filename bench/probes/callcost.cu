// callcost.cu -- what single CUDA runtime calls and copy recipes cost on
// this machine: medians of 2000 calls after 50 warm-ups, microseconds
// (bench/NOTES.md, "The engine remade for mid sizes").  Not part of
// make bench; build and run it by hand on a GPU machine:
//
//   nvcc -O2 -o callcost bench/probes/callcost.cu && ./callcost
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <thread>
#include <vector>

static double now_us() {
  timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)

__global__ void empty_kernel() {}

template <class F> static void bench(const char *name, F f, int reps = 2000) {
  std::vector<double> t(reps);
  for (int i = 0; i < 50; i++) f();
  for (int i = 0; i < reps; i++) { double t0 = now_us(); f(); t[i] = now_us() - t0; }
  std::sort(t.begin(), t.end());
  printf("%-60s %8.2f us (p10 %.2f p90 %.2f)\n", name, t[reps / 2], t[reps / 10], t[reps * 9 / 10]);
}

static void spin_legacy() { while (cudaStreamQuery(cudaStreamLegacy) == cudaErrorNotReady) {} }

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  size_t big = 64 << 20;
  char *dev; CK(cudaMallocAsync((void **)&dev, big, cudaStreamLegacy)); CK(cudaDeviceSynchronize());
  char *pin; CK(cudaMallocHost((void **)&pin, big));
  char *page = (char *)malloc(big); memset(page, 1, big); memset(pin, 1, big);
  char *bounce; CK(cudaMallocHost((void **)&bounce, 1 << 20));
  cudaEvent_t ev; CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  int d;
  bench("cudaGetDevice", [&] { cudaGetDevice(&d); });
  bench("cudaSetDevice(0)", [&] { cudaSetDevice(0); });
  bench("cudaStreamQuery(legacy) idle", [&] { cudaStreamQuery(cudaStreamLegacy); });
  bench("cudaStreamQuery(blocking s) idle", [&] { cudaStreamQuery(s); });
  bench("cudaEventRecord(legacy)+Query", [&] { cudaEventRecord(ev, cudaStreamLegacy); while (cudaEventQuery(ev) == cudaErrorNotReady) {} });
  cudaPointerAttributes a;
  bench("cudaPointerGetAttributes pinned", [&] { cudaPointerGetAttributes(&a, pin); });
  bench("cudaPointerGetAttributes pageable", [&] { cudaPointerGetAttributes(&a, page); cudaGetLastError(); });
  bench("cudaPointerGetAttributes device", [&] { cudaPointerGetAttributes(&a, dev); });
  bench("cudaDeviceSynchronize idle", [&] { cudaDeviceSynchronize(); });
  bench("cudaStreamSynchronize(legacy) idle", [&] { cudaStreamSynchronize(cudaStreamLegacy); });
  bench("launch empty (legacy)", [&] { empty_kernel<<<1, 32, 0, cudaStreamLegacy>>>(); }, 2000);
  CK(cudaDeviceSynchronize());
  bench("launch + cudaStreamSynchronize(legacy)", [&] { empty_kernel<<<1, 32, 0, cudaStreamLegacy>>>(); cudaStreamSynchronize(cudaStreamLegacy); });
  bench("launch + spin cudaStreamQuery(legacy)", [&] { empty_kernel<<<1, 32, 0, cudaStreamLegacy>>>(); spin_legacy(); });
  bench("launch + cudaDeviceSynchronize", [&] { empty_kernel<<<1, 32, 0, cudaStreamLegacy>>>(); cudaDeviceSynchronize(); });
  bench("launch + evrec + spin evquery", [&] { empty_kernel<<<1, 32, 0, cudaStreamLegacy>>>(); cudaEventRecord(ev, cudaStreamLegacy); while (cudaEventQuery(ev) == cudaErrorNotReady) {} });
  size_t sizes[] = {16, 1024, 4096, 65536, 1 << 20};
  for (size_t n : sizes) {
    char name[128];
    printf("--- %zu bytes\n", n);
    snprintf(name, sizeof name, "h2d pageable cudaMemcpy"); bench(name, [&] { cudaMemcpy(dev, page, n, cudaMemcpyDefault); });
    snprintf(name, sizeof name, "h2d pageable cudaMemcpy + DevSync"); bench(name, [&] { cudaMemcpy(dev, page, n, cudaMemcpyDefault); cudaDeviceSynchronize(); });
    snprintf(name, sizeof name, "h2d pageable cudaMemcpy + StreamSync(legacy)"); bench(name, [&] { cudaMemcpy(dev, page, n, cudaMemcpyDefault); cudaStreamSynchronize(cudaStreamLegacy); });
    snprintf(name, sizeof name, "h2d pageable cudaMemcpy + spin query"); bench(name, [&] { cudaMemcpy(dev, page, n, cudaMemcpyDefault); spin_legacy(); });
    if (n <= (1 << 20)) {
      snprintf(name, sizeof name, "h2d pageable via bounce memcpy+cudaMemcpy(pinned)"); bench(name, [&] { memcpy(bounce, page, n); cudaMemcpy(dev, bounce, n, cudaMemcpyDefault); });
      snprintf(name, sizeof name, "h2d pageable via bounce memcpy+MemcpyAsync+spin"); bench(name, [&] { memcpy(bounce, page, n); cudaMemcpyAsync(dev, bounce, n, cudaMemcpyDefault, cudaStreamLegacy); spin_legacy(); });
      snprintf(name, sizeof name, "h2d pageable via bounce memcpy+MemcpyAsync+StreamSync"); bench(name, [&] { memcpy(bounce, page, n); cudaMemcpyAsync(dev, bounce, n, cudaMemcpyDefault, cudaStreamLegacy); cudaStreamSynchronize(cudaStreamLegacy); });
    }
    snprintf(name, sizeof name, "h2d pinned cudaMemcpy"); bench(name, [&] { cudaMemcpy(dev, pin, n, cudaMemcpyDefault); });
    snprintf(name, sizeof name, "h2d pinned cudaMemcpy + DevSync"); bench(name, [&] { cudaMemcpy(dev, pin, n, cudaMemcpyDefault); cudaDeviceSynchronize(); });
    snprintf(name, sizeof name, "h2d pinned cudaMemcpy + StreamSync(legacy)"); bench(name, [&] { cudaMemcpy(dev, pin, n, cudaMemcpyDefault); cudaStreamSynchronize(cudaStreamLegacy); });
    snprintf(name, sizeof name, "h2d pinned MemcpyAsync(legacy) + spin"); bench(name, [&] { cudaMemcpyAsync(dev, pin, n, cudaMemcpyDefault, cudaStreamLegacy); spin_legacy(); });
    snprintf(name, sizeof name, "d2h pageable cudaMemcpy"); bench(name, [&] { cudaMemcpy(page, dev, n, cudaMemcpyDefault); });
    snprintf(name, sizeof name, "d2h pageable cudaMemcpy + DevSync"); bench(name, [&] { cudaMemcpy(page, dev, n, cudaMemcpyDefault); cudaDeviceSynchronize(); });
    if (n <= (1 << 20)) {
      snprintf(name, sizeof name, "d2h pageable via bounce MemcpyAsync+spin+memcpy"); bench(name, [&] { cudaMemcpyAsync(bounce, dev, n, cudaMemcpyDefault, cudaStreamLegacy); spin_legacy(); memcpy(page, bounce, n); });
      snprintf(name, sizeof name, "d2h pageable via bounce MemcpyAsync+StreamSync+memcpy"); bench(name, [&] { cudaMemcpyAsync(bounce, dev, n, cudaMemcpyDefault, cudaStreamLegacy); cudaStreamSynchronize(cudaStreamLegacy); memcpy(page, bounce, n); });
    }
    snprintf(name, sizeof name, "d2h pinned cudaMemcpy"); bench(name, [&] { cudaMemcpy(pin, dev, n, cudaMemcpyDefault); });
    snprintf(name, sizeof name, "d2h pinned cudaMemcpy + DevSync"); bench(name, [&] { cudaMemcpy(pin, dev, n, cudaMemcpyDefault); cudaDeviceSynchronize(); });
    snprintf(name, sizeof name, "d2h pinned MemcpyAsync(legacy) + spin"); bench(name, [&] { cudaMemcpyAsync(pin, dev, n, cudaMemcpyDefault, cudaStreamLegacy); spin_legacy(); });
  }
  // Host memcpy from pageable into page-locked memory, T threads each
  // copying its share (the staging engine's fill), joined each time.
  for (size_t n : {(size_t)1 << 20, (size_t)16 << 20}) {
    for (int t : {1, 2, 4, 8, 16}) {
      char name[128];
      snprintf(name, sizeof name, "memcpy pageable->pinned %zu KiB, %d threads (GB/s = KiB/us/1e3*1.024)", n >> 10, t);
      bench(name, [&] {
        std::vector<std::thread> th;
        size_t share = n / t;
        for (int k = 1; k < t; k++) th.emplace_back([=] { memcpy(pin + k * share, page + k * share, share); });
        memcpy(pin, page, share);
        for (auto &x : th) x.join();
      }, 200);
    }
  }
  return 0;
}
