"""Where torch.from_dlpack's time goes when it takes a DeviceArray: the
call itself against CuPy's array and torch's own tensor, gpumem's part
(__dlpack__ with and without a stream, __dlpack_device__) and the
capsule's import alone (torch.utils.dlpack.from_dlpack of a capsule).
Median ns a call of 7 batches.  Needs the cuda backend, PyTorch and
CuPy.  Not part of make bench:

    gpumem bench/probes/torch_from_dlpack.py
"""
import statistics
import sys
import time

import gpumem


def per_call_ns(fn, calls=2000):
    for _ in range(200):
        fn()
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e9)
    return statistics.median(samples)


def main():
    if gpumem.backend != "cuda":
        print("torch_from_dlpack: needs the cuda backend")
        return 77
    import cupy
    import torch
    a = gpumem.zeros(1024, "float32")
    c = cupy.zeros(1024, cupy.float32)
    x = torch.zeros(1024, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream or 1
    rows = [
        ("torch.from_dlpack(DeviceArray)", lambda: torch.from_dlpack(a)),
        ("torch.from_dlpack(cupy array)", lambda: torch.from_dlpack(c)),
        ("torch.from_dlpack(torch tensor)", lambda: torch.from_dlpack(x)),
        ("DeviceArray.__dlpack__()", lambda: a.__dlpack__()),
        ("DeviceArray.__dlpack__(stream=torch's)",
         lambda: a.__dlpack__(stream=stream)),
        ("DeviceArray.__dlpack_device__()", lambda: a.__dlpack_device__()),
        ("torch.utils.dlpack.from_dlpack(capsule), capsule made too",
         lambda: torch.utils.dlpack.from_dlpack(a.__dlpack__())),
    ]
    for name, fn in rows:
        print("%-58s %8.0f ns" % (name, per_call_ns(fn)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
