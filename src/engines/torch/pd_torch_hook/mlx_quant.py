"""The cache path's quantized weights as an mlx-cpu sidecar holds them (MLX's layout: uint32 words
whose little-endian bytes are the codes in k order; mxfp8 e8m0 scale bytes; affine bf16 scales and
biases, src/capture/mlx-cpu/sidecar-weights.ts) and MLX's two CPU quantized matmuls with bf16 x
(backend/cpu/quantized.cpp; the TypeScript port is src/numerics/mlx-cpu/quantized-matmul.ts):
  mxfp8 g32 (fp_qmm_t):  per output, per group: gsum = sum(gsum + product(x w)) over its 32 k;
                         total = sum(total + scaled(2^(s-127) gsum))
  affine g64 (_qmm_t):   w = dequantized(dequantized(scale q) + bias);
                         total = sum(total + product(x w)) over every k in order
The chains are sequential in k, as MLX's CPU runs them (simd width 1 for bf16): emulated with one
element-wise step per k over all rows and outputs at once, so the GPU computes MLX's order exactly
(no BLAS, no reassociation); the price is k sequential steps."""
from dataclasses import dataclass

import numpy as np
import torch

from .fp32 import canonical_nan
from .mlx_math import rounder


def _mlx_e4m3_values() -> np.ndarray:
    """MLX's FromFP8 (unary_ops.h:154): e4m3fn, except 0x7F -> 480 and 0xFF -> -480."""
    out = np.zeros(256, dtype=np.float32)
    for code in range(256):
        e, m = (code >> 3) & 15, code & 7
        v = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        out[code] = -v if code & 0x80 else v
    out[0x7f], out[0xff] = 480, -480
    return out


MLX_E4M3_VALUES = _mlx_e4m3_values()


def mx_scales(scales: np.ndarray) -> np.ndarray:
    """e8m0 bytes as MLX's bf16 group scales: 2^(s-127); s = 0 is 2^-127, s = 255 is +inf."""
    s = scales.astype(np.int64)
    return np.where(s == 255, np.inf, np.ldexp(np.float64(1), s - 127)).astype(np.float32)


@dataclass
class Mxfp8Weight:
    values: torch.Tensor  # [k, n] decoded e4m3 values (k-major: step i reads one contiguous row)
    scales: torch.Tensor  # [k/32, n]


@dataclass
class AffineWeight:
    dequantized: torch.Tensor  # [k, n] in the sidecar's dequantized rounding (k-major)


def code_bytes(words: np.ndarray, name: str) -> np.ndarray:
    """[n, k/4] uint32 words -> [n, k] code bytes (little-endian: byte 4i+j is bits 8j..8j+7 of word i)."""
    if words.dtype != np.uint32 or words.ndim != 2:
        raise ValueError(f'mlx-cpu weights: {name} is {words.dtype} {list(words.shape)}, not packed uint32 [n, words]')
    return words.astype('<u4').view(np.uint8).reshape(words.shape[0], words.shape[1] * 4)


def mxfp8_weight(codes: np.ndarray, scales: np.ndarray, name: str, device: torch.device) -> Mxfp8Weight:
    n, k = codes.shape
    if scales.dtype != np.uint8 or scales.shape != (n, k // 32) or k % 32:
        raise ValueError(f'mlx-cpu weights: {name}.scales is {scales.dtype} {list(scales.shape)}, expected uint8 [{n}, {k // 32}]')
    return Mxfp8Weight(torch.from_numpy(np.ascontiguousarray(MLX_E4M3_VALUES[codes].T)).to(device),
                       torch.from_numpy(np.ascontiguousarray(mx_scales(scales).T)).to(device))


def affine_weight(codes: np.ndarray, scales: np.ndarray, biases: np.ndarray, group: int, to: str, name: str,
                  device: torch.device) -> AffineWeight:
    """Dequantize once (it does not depend on x): round(round(scale q) + bias)."""
    n, k = codes.shape
    if k % group or scales.shape != (n, k // group) or biases.shape != scales.shape:
        raise ValueError(f'mlx-cpu weights: {name} scales {list(scales.shape)} / biases {list(biases.shape)} do not fit [{n}, {k}] in groups of {group}')
    r = rounder(to)
    s = torch.from_numpy(np.repeat(scales, group, axis=1))
    b = torch.from_numpy(np.repeat(biases, group, axis=1))
    q = torch.from_numpy(codes.astype(np.float32))
    return AffineWeight(r(r(s * q) + b).t().contiguous().to(device))


def mxfp8_matmul(x: torch.Tensor, w: Mxfp8Weight, q: dict) -> torch.Tensor:
    """x [m, k] bf16 values -> [m, n] (fp_qmm_t with the sidecar's quantizedMatmul points)."""
    product, add, scaled = rounder(q['product']), rounder(q['sum']), rounder(q['scaled'])
    m, k = x.shape
    xt = x.t().contiguous()
    n = w.values.shape[1]
    total = torch.zeros((m, n), dtype=torch.float32, device=x.device)
    for g in range(k // 32):
        gsum = torch.zeros_like(total)
        for i in range(g * 32, g * 32 + 32):
            gsum = add(gsum + product(xt[i][:, None] * w.values[i][None, :]))
        total = add(total + scaled(w.scales[g][None, :] * gsum))
    # A NaN output is the positive quiet NaN, as the TypeScript kernels store it.
    return canonical_nan(total)


def affine_matmul(x: torch.Tensor, w: AffineWeight, q: dict) -> torch.Tensor:
    """x [m, k] bf16 values -> [m, n] (_qmm_t: one running sum over k, no group sums)."""
    product, add = rounder(q['product']), rounder(q['sum'])
    m, k = x.shape
    xt = x.t().contiguous()
    total = torch.zeros((m, w.dequantized.shape[1]), dtype=torch.float32, device=x.device)
    for i in range(k):
        total = add(total + product(xt[i][:, None] * w.dequantized[i][None, :]))
    return canonical_nan(total)
