"""Where torch.from_dlpack's time goes when it takes a DeviceArray: the
call itself against CuPy's array, torch's own tensor and cuda.core's
Buffer (where cuda.core imports), gpumem's part and each peer's
(__dlpack__ with and without a stream, __dlpack_device__), the
capsule's import alone (torch.utils.dlpack.from_dlpack of a capsule),
and the tensor's end (the capsule's deleter) apart.  Median ns a call of
7 batches.  Needs the cuda backend, PyTorch and CuPy.  Not part of make
bench:

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
    capsule_rows = [("DeviceArray", a), ("cupy array", c)]
    try:
        from cuda import core
        dev = core.Device(0)
        dev.set_current()
        peer_stream = dev.create_stream()
        buf = core.DeviceMemoryResource(dev).allocate(4096,
                                                      stream=peer_stream)
        peer_stream.sync()
        rows += [
            ("torch.from_dlpack(cuda.core Buffer)",
             lambda: torch.from_dlpack(buf)),
            ("Buffer.__dlpack__(stream=torch's)",
             lambda: buf.__dlpack__(stream=stream)),
            ("Buffer.__dlpack_device__()", lambda: buf.__dlpack_device__()),
        ]
        capsule_rows.append(("cuda.core Buffer", buf))
    except ImportError as e:
        print(f"cuda.core: not importable ({e}), its rows not run")
    rows += [("cupy array.__dlpack__(stream=torch's)",
              lambda: c.__dlpack__(stream=stream)),
             ("cupy array.__dlpack_device__()",
              lambda: c.__dlpack_device__())]
    # The tensor kept, then dropped: the import alone, then the deleter.
    for label, obj in capsule_rows:
        kept = []
        rows.append((f"torch.from_dlpack({label}), tensor kept",
                     lambda obj=obj, kept=kept: kept.append(
                         torch.from_dlpack(obj))))
        rows.append((f"  ... the kept tensors dropped, one each",
                     lambda kept=kept: kept.pop() if kept else None))
    for name, fn in rows:
        print("%-58s %8.0f ns" % (name, per_call_ns(fn)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
