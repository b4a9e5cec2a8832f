"""What a child's open of a shared array costs by size: the parent
shares three arrays of 1 GiB and one of 4 KiB (gpumem.shared_empty,
share), a spawned child with its CUDA context made opens each in turn
(gpumem.open_shared) and reports the microseconds of each open: the
first pays for importing the parent's pool, each one for mapping its
block (bench/NOTES.md, "The peers on one H100").

    python3 bench/probes/ipc_open_sizes.py      (the module on sys.path)
"""

import multiprocessing as mp
import time

import gpumem


def child(conn):
    gpumem.zeros((1,), "float32")
    gpumem.synchronize()
    conn.send("ready")
    times = []
    for handle in conn.recv():
        start = time.perf_counter()
        a = gpumem.open_shared(handle)
        times.append(round((time.perf_counter() - start) * 1e6, 1))
        a.free()
    conn.send(times)
    conn.recv()


def main():
    arrays = [gpumem.shared_empty((1 << 28,), "float32") for _ in range(3)]
    arrays.append(gpumem.shared_empty((1024,), "float32"))
    gpumem.synchronize()
    handles = [gpumem.share(a) for a in arrays]
    parent, kid = mp.get_context("spawn").Pipe()
    proc = mp.get_context("spawn").Process(target=child, args=(kid,))
    proc.start()
    parent.recv()
    parent.send(handles)
    print("open us (1 GiB, 1 GiB, 1 GiB, 4 KiB):", parent.recv(), flush=True)
    parent.send("done")
    proc.join()


if __name__ == "__main__":
    main()
