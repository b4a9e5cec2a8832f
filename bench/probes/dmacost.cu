// dmacost.cu -- how fast the DMA engine moves 8 chunks between
// page-locked memory and the device depending on what the CPU did to that
// memory just before: nothing, filled it through the caches (memcpy, 1
// or 8 threads), filled it with non-temporal stores, or read it (and
// flushed it) before a copy into it (bench/HISTORY.md, "The staging
// engine's slow DMA").  Medians of 7, microseconds and GB/s.  Not part of
// make bench; by hand on an x86-64 GPU machine:
//
//   nvcc -O2 -std=c++17 -Xcompiler -mavx2 -Xcompiler -mclflushopt \
//     -o dmacost bench/probes/dmacost.cu && ./dmacost
#include <cuda_runtime.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <thread>
#include <vector>
#include <algorithm>
static double now_us() { timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3; }
static void nt_copy(char *dst, const char *src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(src + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(src + i + 32));
    _mm256_stream_si256((__m256i *)(dst + i), a);
    _mm256_stream_si256((__m256i *)(dst + i + 32), b);
  }
  _mm_sfence();
  memcpy(dst + i, src + i, n - i);
}
static void par(int T, char *dst, const char *src, size_t n, bool nt) {
  std::vector<std::thread> th; size_t share = (n / T + 4095) & ~(size_t)4095;
  for (int k = 1; k < T; k++) { size_t o = k * share; if (o >= n) break; size_t l = std::min(share, n - o);
    th.emplace_back([=] { if (nt) nt_copy(dst + o, src + o, l); else memcpy(dst + o, src + o, l); }); }
  size_t l = std::min(share, n); if (nt) nt_copy(dst, src, l); else memcpy(dst, src, l);
  for (auto &x : th) x.join();
}
int main() {
  cudaSetDevice(0); cudaFree(0);
  size_t big = 64 << 20;
  char *ring, *dev, *page = (char *)malloc(big); memset(page, 5, big);
  cudaMallocHost(&ring, big); memset(ring, 1, big); cudaMalloc(&dev, big);
  for (size_t chunk : {(size_t)512 << 10, (size_t)2 << 20, (size_t)8 << 20}) {
    size_t n = chunk * 8;
    for (int mode = 0; mode < 5; mode++) {
      const char *names[] = {"h2d cold (no CPU touch)", "h2d after memcpy fill (1 thread)", "h2d after NT fill (1 thread)", "h2d after memcpy fill (8 threads)", "h2d after NT fill (8 threads)"};
      std::vector<double> t;
      for (int rep = 0; rep < 7; rep++) {
        cudaDeviceSynchronize();
        // evict: touch other memory
        double t0 = now_us(), dma = 0;
        for (int i = 0; i < 8; i++) {
          char *slot = ring + i * chunk;
          if (mode == 1) memcpy(slot, page + i * chunk, chunk);
          if (mode == 2) nt_copy(slot, page + i * chunk, chunk);
          if (mode == 3) par(8, slot, page + i * chunk, chunk, false);
          if (mode == 4) par(8, slot, page + i * chunk, chunk, true);
        }
        double t1 = now_us();
        for (int i = 0; i < 8; i++) cudaMemcpyAsync(dev + i * chunk, ring + i * chunk, chunk, cudaMemcpyHostToDevice, cudaStreamLegacy);
        cudaStreamSynchronize(cudaStreamLegacy);
        dma = now_us() - t1;
        t.push_back(dma); (void)t0;
      }
      std::sort(t.begin(), t.end());
      printf("chunk %5zu KiB x8: %-36s DMA after fill: %8.1f us = %5.1f GB/s\n", chunk >> 10, names[mode], t[3], n / t[3] / 1e3);
    }
  }
  // Device to host: DMA into the ring, cold or after the CPU read it (8 threads), or after read + clflushopt; then the
  // copy-out from the ring to pageable memory, 8 or 16 threads.
  for (size_t chunk : {(size_t)512 << 10, (size_t)2 << 20, (size_t)8 << 20}) {
    size_t n = chunk * 8;
    for (int mode = 0; mode < 3; mode++) {
      const char *names[] = {"d2h cold (ring not read)", "d2h after CPU read ring (8 thr)", "d2h after read + clflushopt"};
      std::vector<double> t, out;
      for (int rep = 0; rep < 7; rep++) {
        cudaDeviceSynchronize();
        if (mode >= 1) par(8, page, ring, n, false);
        if (mode == 2) { for (size_t o = 0; o < n; o += 64) _mm_clflushopt(ring + o); _mm_sfence(); }
        double t1 = now_us();
        for (int i = 0; i < 8; i++) cudaMemcpyAsync(ring + i * chunk, dev + i * chunk, chunk, cudaMemcpyDeviceToHost, cudaStreamLegacy);
        cudaStreamSynchronize(cudaStreamLegacy);
        t.push_back(now_us() - t1);
        // The copy-out that follows in the staging engine: 8 and 16 threads
        // read what the DMA engine just wrote into the pageable buffer.
        double t2 = now_us(); par(mode == 0 ? 8 : 16, page, ring, n, false); out.push_back(now_us() - t2);
      }
      std::sort(t.begin(), t.end()); std::sort(out.begin(), out.end());
      printf("chunk %5zu KiB x8: %-36s DMA: %8.1f us = %5.1f GB/s; copy-out after it (%d thr): %5.1f GB/s\n", chunk >> 10, names[mode], t[3], n / t[3] / 1e3, mode == 0 ? 8 : 16, n / out[3] / 1e3);
    }
  }
  return 0;
}
