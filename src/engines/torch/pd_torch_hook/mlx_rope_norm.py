"""mx.fast.rope(traditional=True, freqs=...) and mx.fast.rms_norm as MLX's CPU runs them (their
unfused fallback graphs), and the freqs DeepseekV4RoPE passes: the TypeScript ports are
src/numerics/mlx-cpu/{rope,rms-norm,pow}.ts. The freqs depend on the config only and are computed
on the host in numpy float32; rope and the norm run on the tensors' device."""
import math
from typing import Optional

import numpy as np
import torch

from .fp32 import canonical_nan
from .mlx_math import mlx_sincos, rounder

f32 = np.float32


def _fr(x: float) -> float:
    """Math.fround."""
    return float(f32(x))


def _powf(base: float, exponent: float) -> float:
    """glibc powf as far as the probes reach: a double pow rounded once (pow.ts)."""
    return _fr(math.pow(_fr(base), _fr(exponent)))


def deepseek_v4_rope_freqs(dims: int, base: float, yarn: Optional[dict], freq_scale: int, head_dim: int) -> np.ndarray:
    """DeepseekV4RoPE's `_freqs` (1/inv_freq), YaRN-blended when `yarn` is set, divided by
    `freq_scale` and prefixed with +inf for the (head_dim - dims)/2 pairs rope leaves alone."""
    half = dims // 2
    inv = [_fr(1 / _powf(base, _fr(_fr(2 * i) / dims))) for i in range(half)]
    if yarn is not None:
        def correction_dim(rotations: float) -> float:
            return dims * math.log(yarn['originalMaxPositionEmbeddings'] / (rotations * 2 * math.pi)) / (2 * math.log(base))
        low = max(math.floor(correction_dim(yarn['betaFast'])), 0)
        high = min(math.ceil(correction_dim(yarn['betaSlow'])), dims - 1)
        if low == high:
            high += 0.001
        span = _fr(high - low)
        factor = _fr(yarn['factor'])
        blended = []
        for i in range(half):
            ramp = _fr(_fr(i - low) / span)
            smooth = _fr(1 - min(max(ramp, 0.0), 1.0))
            scaled = _fr(_fr(inv[i] / factor) * _fr(1 - smooth))
            blended.append(_fr(scaled + _fr(inv[i] * smooth)))
        inv = blended
    nope = (head_dim - dims) // 2
    freqs = np.full(head_dim // 2, np.inf, dtype=np.float32)
    for i in range(half):
        f = _fr(1 / inv[i])
        freqs[nope + i] = f if freq_scale == 1 else _fr(f / freq_scale)
    return freqs


def rope_inv_freqs(freqs: np.ndarray) -> np.ndarray:
    """reciprocal(freqs) in float32: +inf gives 0 (the pair is not rotated)."""
    with np.errstate(divide='ignore'):
        return (f32(1) / freqs.astype(np.float32)).astype(np.float32)


def mlx_rope(x: torch.Tensor, inv: torch.Tensor, positions: torch.Tensor, rope: dict) -> torch.Tensor:
    """Rows x [n, d] (bf16 values) rotated as positions [n] (pairs 2i, 2i+1 over the whole row, inv
    [d/2]): theta = f32(f32(pos) * inv); c, s = Cephes cos/sin rounded by `tables`;
    even = result(product(x1 c) - product(x2 s)), odd = result(product(x1 s) + product(x2 c))."""
    table, product, result = rounder(rope['tables']), rounder(rope['product']), rounder(rope['result'])
    theta = positions.to(torch.float32)[:, None] * inv[None, :]
    s, c = mlx_sincos(theta)
    c, s = table(c), table(s)
    x1, x2 = x[:, 0::2], x[:, 1::2]
    even = result(product(x1 * c) - product(x2 * s))
    odd = result(product(x1 * s) + product(x2 * c))
    # Stored as it is: every NaN the canonical one (mlx_math.bf16_round leaves which NaN open).
    return canonical_nan(torch.stack([even, odd], -1).reshape(x.shape))


def mlx_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, norm: dict) -> torch.Tensor:
    """Rows x [n, d]: ss = sequential f32 sum of f32(x^2); mean = f32(ss * f32(1/d));
    r = f32(1 / f32(sqrt(f32(mean + f32(eps))))); y = scaled(x r); out = weighted(y w)."""
    n, d = x.shape
    ss = torch.zeros(n, dtype=torch.float32, device=x.device)
    for i in range(d):
        ss = ss + x[:, i] * x[:, i]
    c = lambda v: torch.tensor(v, dtype=torch.float32, device=x.device)  # noqa: E731
    mean = ss * (c(1.0) / c(float(d)))
    r = c(1.0) / torch.sqrt(mean + c(eps))
    y = rounder(norm['scaled'])(x * r[:, None])
    return rounder(norm['weighted'])(y * weight[None, :])
