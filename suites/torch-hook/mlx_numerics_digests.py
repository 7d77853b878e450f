#!/usr/bin/python3
"""The torch hook's MLX element-wise ports (pd_torch_hook/mlx_math.py, mlx_rope_norm.py) on the
inputs suites/mlx/capture-mlx-cpu.test.ts digests: Cephes exp/sin/cos on 100,001 float32 values,
the DeepseekV4RoPE freqs, and fma32's double-rounding cases. Prints one JSON object of sha256 hex
digests (float32 little-endian bytes) and values, for mlx-cpu-numerics.test.ts to compare with the
TypeScript ports. --device picks where torch computes (cpu or cuda)."""
import hashlib
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'src', 'engines', 'torch'))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from pd_torch_hook.mlx_math import fma32, mlx_exp, mlx_sincos  # noqa: E402
from pd_torch_hook.mlx_rope_norm import deepseek_v4_rope_freqs  # noqa: E402


def digest(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype='<f4').tobytes()).hexdigest()


def main() -> int:
    device = torch.device(sys.argv[sys.argv.index('--device') + 1] if '--device' in sys.argv else 'cpu')
    i = np.arange(100001, dtype=np.float64) - 50000
    xe = torch.from_numpy((i * 0.0019).astype(np.float32)).to(device)
    xs = torch.from_numpy((i * 0.013).astype(np.float32)).to(device)
    sin, cos = mlx_sincos(xs)
    yarn = {'factor': 32, 'originalMaxPositionEmbeddings': 1024, 'betaFast': 32, 'betaSlow': 1}
    t = lambda v: torch.tensor([v], dtype=torch.float32, device=device)  # noqa: E731
    a = 1 + 2 ** -12
    out = {
        'exp': digest(mlx_exp(xe).cpu().numpy()),
        'sin': digest(sin.cpu().numpy()),
        'cos': digest(cos.cpu().numpy()),
        'freqs': [digest(deepseek_v4_rope_freqs(64, 10000, None, 1, 128)), digest(deepseek_v4_rope_freqs(64, 160000, yarn, 1, 128)),
                  digest(deepseek_v4_rope_freqs(64, 160000, yarn, 4, 128)), digest(deepseek_v4_rope_freqs(64, 160000, yarn, 128, 128))],
        'fma': [float(fma32(t(a), t(a), t(2 ** -60))), float(fma32(t(a), t(a), t(-(2 ** -60)))), float(fma32(t(a), t(-a), t(2 ** -60)))],
    }
    print(json.dumps(out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
