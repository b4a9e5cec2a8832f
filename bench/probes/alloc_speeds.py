"""Whether gpumem's alloc+free of 1 MiB costs more than the raw call:
in one process, the median ns of gpumem.empty + del (device memory,
managed, pinned_empty) beside CuPy's runtime.mallocAsync + freeAsync
from Python, so that a process's speed (the machine's two speeds a
process, bench/NOTES.md) shows on both at once.  One JSON line.

    gpumem bench/probes/alloc_speeds.py [plain|torch]
    (torch: PyTorch imported and its context made first)

Run it in several processes, and against another tree's build, in
turn (bench/NOTES.md, "The peers on one H100").
"""

import json
import os
import sys

import gpumem

# The peers section's timer: the median of 9 loops of about 20 ms each.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from peers import per_call  # noqa: E402


def per_call_us(fn):
    return round(per_call(fn) * 1e6, 3)


def main(mode):
    if mode == "torch":
        import torch
        torch.zeros(1, device="cuda")
    out = {}

    def device():
        a = gpumem.empty((262144,), "float32")
        del a
    out["empty_del"] = per_call_us(device)
    try:
        def managed():
            a = gpumem.empty((262144,), "float32", memory="managed")
            del a
        out["managed"] = per_call_us(managed)
    except TypeError as e:
        out["managed"] = f"absent: {e}"

    def pinned():
        h = gpumem.pinned_empty((262144,), "float32")
        del h
    out["pinned"] = per_call_us(pinned)
    try:
        import cupy
        rt = cupy.cuda.runtime

        def raw():
            rt.freeAsync(rt.mallocAsync(1 << 20, 0), 0)
        out["cupy_rt_async"] = per_call_us(raw)
    except Exception as e:  # noqa: BLE001 -- reported, not raised
        out["cupy_rt_async"] = f"absent: {e}"
    print(mode, json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "plain"))
