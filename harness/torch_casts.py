"""Golden casts from PyTorch (and ml_dtypes for e2m1) over a fixed set of float32 inputs.

Writes, into the folder named by argv[1]:
  <format>.cpu.bin       the codes torch produced on the CPU (uint16 for bf16/f16, uint8 otherwise)
  torch-casts.json       sha256 of the inputs and of every format's codes (CPU, and CUDA when
                         there is a GPU), plus versions

The input set (see `inputs()`), NaN bit patterns removed, must match
suites/numerics/torch-casts.test.ts, which recomputes every hash with pd-bridge's encoders.
"""
import hashlib
import json
import os
import sys

import numpy as np
import torch


def inputs() -> np.ndarray:
    parts = []
    # A: every bf16 code's float32 value and the float32 just above and below it (bit +-1):
    # all bf16, e4m3, e5m2 and e2m1 grid points and midpoints, and their neighbours.
    high = np.arange(65536, dtype=np.int64) << 16
    for off in (0, 1, -1):
        parts.append(((high + off) % (1 << 32)).astype(np.uint32))
    # B: float32 exponents 96..143 (2^-31 .. 2^16, the f16 range and past it), every top-10-bit
    # mantissa, and low bits at a half-f16-step (0x1000) and next to it, both signs.
    exps = np.arange(96, 144, dtype=np.uint64)
    mants = np.arange(1024, dtype=np.uint64) << 13
    offs = np.array([0, 0x1000, 0xFFF, 0x1001], dtype=np.uint64)
    body = (exps[:, None, None] << 23) | (mants[None, :, None] + offs[None, None, :])
    body = body.reshape(-1)
    parts.append(body.astype(np.uint32))
    parts.append((body | (1 << 31)).astype(np.uint32))
    bits = np.concatenate(parts)
    is_nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)
    return bits[~is_nan]


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def main() -> None:
    out = sys.argv[1]
    bits = inputs()
    x = torch.from_numpy(bits.view(np.float32).copy())
    record = {'torch': torch.__version__, 'count': int(bits.size), 'inputs': sha(bits), 'hashes': {}}
    devices = ['cpu'] + (['cuda'] if torch.cuda.is_available() else [])
    for device in devices:
        xd = x.to(device)
        casts = {
            'bf16': xd.to(torch.bfloat16).view(torch.uint16),
            'f16': xd.to(torch.float16).view(torch.uint16),
            'e4m3-nosat': xd.to(torch.float8_e4m3fn).view(torch.uint8),
            'e4m3-sat': xd.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8),
            'e5m2': xd.to(torch.float8_e5m2).view(torch.uint8),
        }
        for name, t in casts.items():
            a = t.cpu().numpy()
            if device == 'cpu':
                a.tofile(os.path.join(out, f'{name}.{device}.bin'))
            record['hashes'][f'{name}.{device}'] = sha(a)
    try:
        import ml_dtypes
        clamped = np.clip(bits.view(np.float32), -6, 6)
        e2m1 = clamped.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
        e2m1.tofile(os.path.join(out, 'e2m1-sat.ml_dtypes.bin'))
        record['hashes']['e2m1-sat.ml_dtypes'] = sha(e2m1)
        record['ml_dtypes'] = ml_dtypes.__version__
    except Exception as err:  # noqa: BLE001 - record why, keep the torch results
        record['ml_dtypes_error'] = repr(err)
    with open(os.path.join(out, 'torch-casts.json'), 'w') as f:
        json.dump(record, f, indent=2)
    print(json.dumps(record, indent=2))


if __name__ == '__main__':
    main()
