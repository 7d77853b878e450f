"""The kv path a sidecar's cache math selects: `decoder` (kv_path.py, the decoder profile's own
arithmetic) or `mlx-cpu` (mlx_kv_path.py, MLX 0.32.2's CPU arithmetic with the sidecar's rounding
points). A caller that names the cache math it expects is refused when the sidecar says another,
before any work: a capture in the wrong arithmetic would be stored under the sidecar's fingerprint
and served as if it were right."""
from typing import Optional

import torch

from .kv_path import KvPath
from .mlx_kv_path import MlxCpuKvPath
from .sidecar import CACHE_MATHS, Sidecar


class CacheMathError(ValueError):
    pass


def make_kv_path(sidecar: Sidecar, device: torch.device, matmul: str = 'exact', expect: Optional[str] = None):
    math = sidecar.cache_math
    if expect is not None:
        if expect not in CACHE_MATHS:
            raise CacheMathError(f'cache math {expect!r}: this hook computes {", ".join(CACHE_MATHS)}')
        if expect != math:
            raise CacheMathError(f'{sidecar.dir}: the sidecar was exported for the {math} cache math, this hook was asked for {expect}: '
                                 f'export the sidecar with --cache-math {expect}, or run the hook with the sidecar\'s math')
    if math == 'mlx-cpu':
        if matmul != 'exact':
            raise CacheMathError(f'matmul {matmul!r}: the mlx-cpu cache math has one order, MLX\'s sequential one (matmul exact)')
        return MlxCpuKvPath(sidecar, device)
    return KvPath(sidecar, device, matmul)
