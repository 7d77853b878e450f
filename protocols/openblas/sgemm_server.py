#!/usr/bin/env python3
"""OpenBLAS sgemm through numpy, timed for protocols/bench-kernels.ts, one shape per stdin line.

In:  {"m": 128, "k": 4096, "n": 4096, "timeMs": 400}   (one JSON object per line)
Out: {"p50Ms": ..., "meanMs": ..., "samples": ...}       (one JSON object per line)
The first line out names numpy, the BLAS it calls and OpenBLAS's own config string. y = x @ w.T
with x [m, k] and w [n, k] float32, as our matmul; OPENBLAS_NUM_THREADS (set by the caller) fixes
the threads. Nothing else is computed: this is the reference for speed only, never for values.
"""
import ctypes
import json
import sys
import time

import numpy as np


def blas_library():
    """The shared BLAS numpy's process loaded, from /proc/self/maps, and OpenBLAS's config string."""
    paths = []
    with open('/proc/self/maps') as maps:
        for line in maps:
            path = line.split()[-1] if '/' in line else ''
            if ('blas' in path or 'lapack' in path) and path not in paths:
                paths.append(path)
    config = None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            fn = lib.openblas_get_config
            fn.restype = ctypes.c_char_p
            config = fn().decode()
            break
        except (OSError, AttributeError):
            continue
    return paths, config


def main():
    np.ones((8, 8), np.float32) @ np.ones((8, 8), np.float32)  # loads the BLAS
    paths, config = blas_library()
    print(json.dumps({'numpy': np.__version__, 'blas': paths, 'openblas': config}), flush=True)
    rng = np.random.default_rng(1)
    for line in sys.stdin:
        req = json.loads(line)
        m, k, n, budget = int(req['m']), int(req['k']), int(req['n']), float(req['timeMs']) / 1000
        x = (rng.random((m, k), dtype=np.float32) - 0.5)
        w = (rng.random((n, k), dtype=np.float32) - 0.5) * 0.05
        out = np.empty((m, n), np.float32)
        wt = w.T
        for _ in range(3):
            np.matmul(x, wt, out=out)
        times = []
        start = time.perf_counter()
        while time.perf_counter() - start < budget or len(times) < 5:
            t0 = time.perf_counter()
            np.matmul(x, wt, out=out)
            times.append(time.perf_counter() - t0)
        times.sort()
        print(json.dumps({'p50Ms': 1000 * times[len(times) // 2], 'meanMs': 1000 * sum(times) / len(times), 'samples': len(times)}), flush=True)


if __name__ == '__main__':
    main()
