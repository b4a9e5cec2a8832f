"""Where a synchronous call's microseconds go, seen from a script:
gpumem.synchronize() on an idle device, a launch with its wait, 16-byte
copies, copies of 1 KiB to 1 MiB each way (page-locked and NumPy memory,
with and without a synchronize after), and the stitching workload's 4 x 10 loop
timed step by step (bench/HISTORY.md, "Where a small copy's microseconds
went").  Medians, microseconds.  Not part of make bench:

    src/gpumem bench/probes/callpath.py

PROBE_TAG (environment) prefixes every line, to tell runs apart.
"""
import os, sys, time
import numpy as np
import gpumem

pc = time.perf_counter_ns
tag = os.environ.get("PROBE_TAG", "")


def med(name, f, reps=4000, warm=200):
    for _ in range(warm):
        f()
    t = []
    for _ in range(reps):
        t0 = pc(); f(); t.append(pc() - t0)
    t.sort()
    print(f"{tag}{name:<58s} {t[len(t)//2]/1e3:8.2f} us  (p10 {t[len(t)//10]/1e3:.2f} p90 {t[len(t)*9//10]/1e3:.2f})", flush=True)


x = gpumem.to_device(np.ones(1, np.float32))
saxpy = gpumem.kernels.saxpy
dev0 = gpumem.Device(0)
med("gpumem.synchronize() idle", gpumem.synchronize)
med("Device(0).synchronize() idle", dev0.synchronize)
med("saxpy(0,0,x,x) launch+wait", lambda: saxpy(0, 0.0, x, x))
h16 = np.arange(4, dtype=np.float32); b16 = np.empty(4, np.float32); d16 = gpumem.empty(4)
med("copy_to_gpu 16 B pageable", lambda: gpumem.copy_to_gpu(h16, d16, 4))
med("copy_from_gpu 16 B pageable", lambda: gpumem.copy_from_gpu(d16, b16, 4))
p16 = gpumem.pinned_empty(4, "float32")
med("copy(d16, pinned16)", lambda: gpumem.copy(d16, p16))
med("copy(pinned16, d16)", lambda: gpumem.copy(p16, d16))
med("copy(d16, h16) pageable", lambda: gpumem.copy(d16, h16))
med("copy(b16, d16) pageable", lambda: gpumem.copy(b16, d16))

big = 2 << 20
pin = gpumem.pinned_empty(big // 4, "float32"); pin[:] = 1
page = np.ones(big // 4, np.float32)
dev = gpumem.empty(big // 4)
for size in (1024, 4096, 65536, 1 << 20):
    n = size // 4
    dv = dev[:n]; pv = pin[:n]; gv = page[:n]
    reps = 3000 if size < (1 << 20) else 1000
    for nm, h in (("pinned", pv), ("pageable", gv)):
        med(f"{size:>8d} {nm} h2d copy", lambda: gpumem.copy(dv, h), reps)
        med(f"{size:>8d} {nm} h2d copy+sync", lambda: (gpumem.copy(dv, h), gpumem.synchronize()), reps)
        med(f"{size:>8d} {nm} d2h copy", lambda: gpumem.copy(h, dv), reps)
        med(f"{size:>8d} {nm} d2h copy+sync", lambda: (gpumem.copy(h, dv), gpumem.synchronize()), reps)

# The 4 x 10 loop, step by step.
kernel = gpumem.kernels.algo_seed
rng = np.random.default_rng(1)
small = []
for i in range(4):
    m = gpumem.alloc_gpu_memory(10)
    gpumem.copy_to_gpu(rng.random(10, dtype=np.float32), m, 10)
    small.append(m)
update = np.zeros(4, np.float32); partial = np.empty((4, 4), np.float32)
gu = gpumem.alloc_gpu_memory(4); gp = [gpumem.alloc_gpu_memory(4) for _ in range(4)]
steps = {}
whole = []
for r in range(-300, 4000):
    if r % 100 == 0:
        update[:] = 0.5
        gpumem.copy_to_gpu(update, gu, 4)
    t = [pc()]
    for i in range(4):
        kernel(small[i], gu, gp[i], 10); t.append(pc())
        gpumem.copy_from_gpu(gp[i], partial[i], 4); t.append(pc())
    p = partial
    update[:] = p[:, 0] + p[:, 1] + p[:, 2] - p[:, 3]; t.append(pc())
    gpumem.copy_to_gpu(update, gu, 4); t.append(pc())
    if r >= 0:
        whole.append(t[-1] - t[0])
        for k in range(len(t) - 1):
            steps.setdefault(k, []).append(t[k + 1] - t[k])
names = []
for i in range(4):
    names += [f"kernel {i}", f"copy_from_gpu {i}"]
names += ["stitching", "copy_to_gpu"]
for k, nm in enumerate(names):
    v = sorted(steps[k]); print(f"{tag}loop step {nm:<40s} {v[len(v)//2]/1e3:8.2f} us")
whole.sort(); print(f"{tag}loop 4x10 iteration (median) {whole[len(whole)//2]/1e3:.2f} us")
