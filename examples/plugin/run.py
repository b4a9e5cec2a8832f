"""Calls the plugin's kernels: gpumem --kernels=./scale.so run.py (as
make check does), or gpumem.load_kernels("./scale.so") from any script."""

import numpy as np

import gpumem

k = gpumem.kernels
x = gpumem.to_device(np.arange(8, dtype=np.float32))
info = k.info("scale")
print(f"backend {gpumem.backend}; scale has a CUDA launcher: {info['cuda']}, "
      f"a C reference: {info['reference']}")
k.scale(8, 0.5, x)
assert x.copy_to_host().tolist() == [i / 2 for i in range(8)]
if gpumem.backend == "host":
    out = gpumem.zeros(1, "float64")
    k.norm2(3, gpumem.to_device(np.array([1.0, 2.0, 2.0])), out)
    assert out.copy_to_host()[0] == 9.0
try:
    k.scale(9, 2.0, x)          # x has 8 elements: refused before launch
except ValueError as exc:
    print("checked:", exc)
print("plugin example: ok")
