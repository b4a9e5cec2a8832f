// loopcost.cu -- the 4 x 10 stitching workload as CUDA calls only, step
// by step: raw C's (a kernel launched and not waited for, then cudaMemcpy
// each way) against gpumem's sequence (the kernel waited for, a wait
// before each copy, the page-locked test, the bounce buffer), and
// variants that drop one piece or wait another way (bench/HISTORY.md,
// "Where a small copy's microseconds went").  Medians of 4000
// iterations, microseconds.  Not part of make bench; by hand:
//
//   nvcc -O2 -o loopcost bench/probes/loopcost.cu && ./loopcost
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>
static double now_us() { timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3; }
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)
__global__ void seed(const float *img, const float *upd, float *part, int n) {
  if (threadIdx.x == 0 && blockIdx.x == 0) { float s = 0; for (int k = 0; k < n; k++) s = img[k]; for (int k = 0; k < 4; k++) part[k] = s + upd[k]; }
}
static float *bounce;
static void spin_legacy() { while (cudaStreamQuery(cudaStreamLegacy) == cudaErrorNotReady) {} }
static void prewait() { int d; cudaGetDevice(&d); spin_legacy(); }
static bool pageable(const void *p) { int d; cudaGetDevice(&d); cudaPointerAttributes a; if (cudaPointerGetAttributes(&a, p)) { cudaGetLastError(); return false; } return a.type == cudaMemoryTypeUnregistered; }
enum { PREWAIT = 1, PTRATTR = 2, KSPIN = 4, KSYNC = 8, BOUNCE = 16, H2D_MEMCPY = 32, D2H_MEMCPY = 64, KEVENT = 128, KPAUSE = 256 };
static cudaEvent_t kev;
static void spin_event() { cudaEventRecord(kev, cudaStreamLegacy); while (cudaEventQuery(kev) == cudaErrorNotReady) {} }
static void spin_pause() { while (cudaStreamQuery(cudaStreamLegacy) == cudaErrorNotReady) { for (int i = 0; i < 200; i++) __builtin_ia32_pause(); } }
static void run(const char *name, int flags, float **img, float *dupd, float **dpart, float *upd, float (*part)[4]) {
  std::vector<std::vector<double>> st(10);
  std::vector<double> whole;
  for (int r = -300; r < 4000; r++) {
    double t[11]; int k = 0; t[k++] = now_us();
    for (int i = 0; i < 4; i++) {
      if (flags & (KSPIN | KSYNC | KEVENT | KPAUSE)) { int d; cudaGetDevice(&d); }
      seed<<<1, 32, 0, cudaStreamLegacy>>>(img[i], dupd, dpart[i], 10);
      if (flags & KSPIN) spin_legacy();
      if (flags & KSYNC) cudaStreamSynchronize(cudaStreamLegacy);
      if (flags & KEVENT) spin_event();
      if (flags & KPAUSE) spin_pause();
      t[k++] = now_us();
      if (flags & PREWAIT) prewait();
      bool pg = true; if (flags & PTRATTR) pg = pageable(part[i]);
      if (flags & D2H_MEMCPY) CK(cudaMemcpy(part[i], dpart[i], 16, cudaMemcpyDeviceToHost));
      else { CK(cudaMemcpyAsync(bounce, dpart[i], 16, cudaMemcpyDeviceToHost, cudaStreamLegacy)); CK(cudaStreamSynchronize(cudaStreamLegacy)); memcpy(part[i], bounce, 16); }
      (void) pg;
      t[k++] = now_us();
    }
    for (int j = 0; j < 4; j++) upd[j] = part[j][0] + part[j][1] + part[j][2] - part[j][3];
    t[k++] = now_us();
    if (flags & PREWAIT) prewait();
    if (flags & PTRATTR) (void) pageable(upd);
    if (flags & H2D_MEMCPY) CK(cudaMemcpy(dupd, upd, 16, cudaMemcpyHostToDevice));
    else { memcpy(bounce + 64, upd, 16); CK(cudaMemcpyAsync(dupd, bounce + 64, 16, cudaMemcpyHostToDevice, cudaStreamLegacy)); CK(cudaStreamSynchronize(cudaStreamLegacy)); }
    t[k++] = now_us();
    if (r >= 0) { whole.push_back(t[k - 1] - t[0]); for (int j = 0; j + 1 < k; j++) st[j].push_back(t[j + 1] - t[j]); }
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  printf("%-44s iteration %7.2f us | steps:", name, med(whole));
  for (int j = 0; j < 10; j++) printf(" %.2f", med(st[j]));
  printf("\n");
}
int main() {
  CK(cudaSetDevice(0)); CK(cudaFree(0));
  CK(cudaMallocHost((void **)&bounce, 1 << 16)); CK(cudaEventCreateWithFlags(&kev, cudaEventDisableTiming));
  float *img[4], *dupd, *dpart[4]; float upd[4] = {0.5f, 0.5f, 0.5f, 0.5f}, part[4][4];
  float h[10]; for (int k = 0; k < 10; k++) h[k] = k;
  for (int i = 0; i < 4; i++) { CK(cudaMalloc(&img[i], 40)); CK(cudaMemcpy(img[i], h, 40, cudaMemcpyDefault)); CK(cudaMalloc(&dpart[i], 16)); }
  CK(cudaMalloc(&dupd, 16)); CK(cudaMemcpy(dupd, upd, 16, cudaMemcpyDefault));
  printf("steps: k0 d2h0 k1 d2h1 k2 d2h2 k3 d2h3 stitch h2d\n");
  for (int rep = 0; rep < 3; rep++) {
    run("raw: launch; cudaMemcpy d2h; cudaMemcpy h2d", D2H_MEMCPY | H2D_MEMCPY, img, dupd, dpart, upd, part);
    run("raw + kernel spin-wait", KSPIN | D2H_MEMCPY | H2D_MEMCPY, img, dupd, dpart, upd, part);
    run("gm: spin; prewait; ptrattr; bounce both", KSPIN | PREWAIT | PTRATTR, img, dupd, dpart, upd, part);
    run("gm - prewait", KSPIN | PTRATTR, img, dupd, dpart, upd, part);
    run("gm - prewait - ptrattr", KSPIN, img, dupd, dpart, upd, part);
    run("gm with StreamSync for kernel", KSYNC | PREWAIT | PTRATTR, img, dupd, dpart, upd, part);
    run("gm - prewait, StreamSync for kernel", KSYNC | PTRATTR, img, dupd, dpart, upd, part);
    run("gm - prewait, event spin for kernel", KEVENT | PTRATTR, img, dupd, dpart, upd, part);
    run("gm - prewait, query+pause spin for kernel", KPAUSE | PTRATTR, img, dupd, dpart, upd, part);
    run("gm, d2h by cudaMemcpy", KSPIN | PREWAIT | PTRATTR | D2H_MEMCPY, img, dupd, dpart, upd, part);
    run("no kernel wait, bounce both (async kernel)", 0, img, dupd, dpart, upd, part);
  }
  return 0;
}
