"""The nanobind algo on the stitching loop's arrays, against NumPy: run
under gpumem with the built module on PYTHONPATH (argv[1]: its name)."""

import importlib
import sys

import numpy as np

import gpumem

module = importlib.import_module(sys.argv[1] if len(sys.argv) > 1
                                 else "algo_nanobind")
rng = np.random.default_rng(7)
images = rng.random(40, dtype=np.float32)
update = rng.random(4, dtype=np.float32)
parts = [gpumem.to_device(p) for p in np.array_split(images, 4)]
device_update = gpumem.to_device(update)
partials = [gpumem.zeros(4, "float32") for _ in parts]
expected = update.copy()
for iteration in range(5):
    for part, partial in zip(parts, partials):
        assert module.algo(part, device_update, partial, len(part)) is partial
    p = [partial.copy_to_host() for partial in partials]
    for i, host_part in enumerate(np.array_split(images, 4)):
        want = (np.float64(host_part).mean() + np.float64(expected)).astype(np.float32)
        np.testing.assert_allclose(p[i], want, rtol=1e-6)
    expected = (p[0] + p[1] + p[2] - p[3]).astype(np.float32)
    device_update = gpumem.to_device(expected)
try:
    module.algo(parts[0], device_update, gpumem.zeros(4, "float64"), 10)
except TypeError as exc:
    print("checked:", exc)
else:
    raise AssertionError("a float64 partial_update was taken")
print(module.__name__, "example: ok")
