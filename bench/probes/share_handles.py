"""Probe: which handle types each device offers for sharing pool memory
between processes, from the driver itself (libcuda through ctypes), and
what gpumem makes of GPUMEM_SHARE_HANDLE=fabric (docs/sharing.md).

    GPUMEM=/path/to/gpumem gpumem bench/probes/share_handles.py

Prints per device CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES
(bit 0x1 POSIX descriptors, 0x8 fabric) and
CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, then whether a child
with GPUMEM_SHARE_HANDLE=fabric can make, share and open an array.
"""

import ctypes
import os
import subprocess
import sys

MEMPOOL_SUPPORTED_HANDLE_TYPES = 119
HANDLE_TYPE_FABRIC_SUPPORTED = 128

FABRIC_CHILD = r"""
import gpumem
try:
    a = gpumem.shared_empty((1 << 20,))
    b = gpumem.open_shared(gpumem.share(a))
    print("GPUMEM_SHARE_HANDLE=fabric: a pool with fabric handles works")
except gpumem.Error as e:
    print("GPUMEM_SHARE_HANDLE=fabric: refused:", e)
"""


def main():
    cuda = ctypes.CDLL("libcuda.so.1")
    if cuda.cuInit(0) != 0:
        print("share_handles: cuInit failed: no CUDA device")
        return 77
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    for d in range(count.value):
        dev = ctypes.c_int()
        cuda.cuDeviceGet(ctypes.byref(dev), d)
        name = ctypes.create_string_buffer(256)
        cuda.cuDeviceGetName(name, 256, dev)
        values = []
        for attr in (MEMPOOL_SUPPORTED_HANDLE_TYPES,
                     HANDLE_TYPE_FABRIC_SUPPORTED):
            value = ctypes.c_int(-1)
            rc = cuda.cuDeviceGetAttribute(ctypes.byref(value), attr, dev)
            values.append(value.value if rc == 0 else "error %d" % rc)
        types = values[0]
        print("device %d (%s): pool handle types %s (posix %s, fabric %s); "
              "fabric handles supported: %s"
              % (d, name.value.decode(), types,
                 bool(types & 1) if isinstance(types, int) else "?",
                 bool(types & 8) if isinstance(types, int) else "?",
                 values[1]))
    out = subprocess.run([os.environ.get("GPUMEM", "gpumem"), "-q", "-c",
                          FABRIC_CHILD],
                         capture_output=True, text=True,
                         env=dict(os.environ, GPUMEM_SHARE_HANDLE="fabric"))
    print(out.stdout.strip() or out.stderr.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
