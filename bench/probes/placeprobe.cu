// placeprobe.cu -- whether where an allocation lands decides its speed
// (bench/HISTORY.md, "The staging engine, fourth form": processes differ by
// a quarter in staged uploads and by 20% in small calls).  Six page-locked
// buffers of 1 GiB, each: the CPU's random-read latency over it (a pointer
// chase of 2 M steps, TLB misses included), the DMA engine's bandwidth for
// 256 MiB each way (median of 7), a 4 KiB copy to the device and a
// synchronize (median of 3000); then four malloc'd buffers, latency only.
// Not part of make bench; by hand on a GPU machine, in several processes:
//
//   nvcc -O2 -o placeprobe bench/probes/placeprobe.cu && ./placeprobe
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
#include <algorithm>
#include <vector>
static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double chase(char *buf, size_t bytes) {
  size_t n = bytes / 64; std::vector<uint32_t> perm(n);
  for (size_t i = 0; i < n; i++) perm[i] = i;
  uint64_t s = 88172645463325252ull;
  for (size_t i = n - 1; i > 0; i--) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; size_t j = s % (i + 1); std::swap(perm[i], perm[j]); }
  for (size_t i = 0; i < n; i++) *(char **)(buf + (size_t)perm[i] * 64) = buf + (size_t)perm[(i + 1) % n] * 64;
  char *p = buf; size_t steps = 2000000; double t0 = now();
  for (size_t i = 0; i < steps; i++) p = *(char **)p;
  double t = now() - t0; if (p == 0) printf("x");
  return t / steps * 1e9;
}
int main() {
  cudaSetDevice(0); cudaFree(0);
  size_t G = 1ull << 30, M256 = 256ull << 20;
  char *dev; cudaMalloc(&dev, M256);
  for (int b = 0; b < 6; b++) {
    char *p; if (cudaMallocHost(&p, G)) { printf("alloc fail\n"); return 1; }
    memset(p, 1, G);
    double lat = chase(p, G);
    std::vector<double> h, d, sm;
    for (int r = 0; r < 7; r++) { double t0 = now(); cudaMemcpy(dev, p, M256, cudaMemcpyHostToDevice); h.push_back(M256 / (now() - t0) / 1e9);
                                  t0 = now(); cudaMemcpy(p, dev, M256, cudaMemcpyDeviceToHost); d.push_back(M256 / (now() - t0) / 1e9); }
    for (int r = 0; r < 3000; r++) { double t0 = now(); cudaMemcpy(dev, p, 4096, cudaMemcpyHostToDevice); cudaDeviceSynchronize(); sm.push_back((now() - t0) * 1e6); }
    std::sort(h.begin(), h.end()); std::sort(d.begin(), d.end()); std::sort(sm.begin(), sm.end());
    printf("pinned %d: chase %.1f ns  h2d %.1f  d2h %.1f GB/s  4KiB h2d+sync %.2f us\n", b, lat, h[3], d[3], sm[1500]);
  }
  for (int b = 0; b < 4; b++) {
    char *p = (char *)malloc(G); memset(p, 1, G);
    printf("malloc %d: chase %.1f ns\n", b, chase(p, G));
  }
  return 0;
}
