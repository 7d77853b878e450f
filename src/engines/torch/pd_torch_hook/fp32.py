"""Exact float32 helpers: bf16 rounding on the bits, the canonical NaN, and our own exp (the
kernels' expF32, src/kernels/fmath.ts), every step one float32 torch operation so the bits match.
Only separate mul/add/sub/div kernels are used: no addcmul, no fused multiply-add."""
import struct

import torch

CANONICAL_NAN_BITS = 0x7fc00000


def f32_from_bits(bits: int) -> float:
    return struct.unpack('<f', struct.pack('<I', bits))[0]


def const(value: float, like: torch.Tensor) -> torch.Tensor:
    """A 0-dim float32 tensor on `like`'s device (no python-scalar promotion questions)."""
    return torch.tensor(value, dtype=torch.float32, device=like.device)


def _to_int32(u: torch.Tensor) -> torch.Tensor:
    # u holds unsigned 32-bit values in int64; wrap into int32 two's complement.
    return torch.where(u >= 2 ** 31, u - 2 ** 32, u).to(torch.int32)


def round_bf16(x: torch.Tensor) -> torch.Tensor:
    """Round float32 values to the nearest bf16 value, ties to even, as src/model/engine/activation.ts
    does on the bits: NaN keeps its sign and becomes quiet (torch's own cast drops the sign)."""
    u = x.contiguous().view(torch.int32).to(torch.int64) & 0xffffffff
    lsb = (u >> 16) & 1
    rounded = ((u + 0x7fff + lsb) & 0xffffffff) & 0xffff0000
    nan = ((u & 0x7f800000) == 0x7f800000) & ((u & 0x007fffff) != 0)
    quiet = (u & 0x80000000) | 0x7fc00000
    return _to_int32(torch.where(nan, quiet, rounded)).view(torch.float32)


def canonical_nan(x: torch.Tensor) -> torch.Tensor:
    """Every NaN written as the kernels write it (0x7fc00000)."""
    nan = torch.tensor(CANONICAL_NAN_BITS, dtype=torch.int32, device=x.device).view(torch.float32)
    return torch.where(torch.isnan(x), nan, x)


def bf16_exact(x: torch.Tensor) -> bool:
    """Whether every value is a bf16 value (low 16 bits zero), as layer-file.ts's exactBf16 asks."""
    return bool(((x.contiguous().view(torch.int32) & 0xffff) == 0).all())


def _pow2(e: torch.Tensor) -> torch.Tensor:
    """2^e for integer e in [-126, 127], exact, from the exponent bits."""
    return ((e + 127) << 23).to(torch.int32).view(torch.float32)


_LOG2E = f32_from_bits(0x3fb8aa3b)
_SHIFT = 12582912.0
_LN2_HI = f32_from_bits(0x3f317200)
_LN2_LO = f32_from_bits(0x35bfbe8e)
_E = [f32_from_bits(b) for b in (0x3e2aaaab, 0x3d2aaaab, 0x3c088889, 0x3ab60b61, 0x39500d01)]
EXP_OVERFLOW = f32_from_bits(0x42b17217)
EXP_UNDERFLOW = -104.0


def exp_f32(x: torch.Tensor) -> torch.Tensor:
    """expF32 element-wise (fmath.ts): NaN -> NaN (canonical), x > 88.7228317 -> +Inf, x < -104 -> +0."""
    c = lambda v: const(v, x)  # noqa: E731
    safe = torch.where(torch.isnan(x), c(0.0), torch.clamp(x, EXP_UNDERFLOW, EXP_OVERFLOW))
    t = safe * c(_LOG2E)
    kf = (t + c(_SHIFT)) - c(_SHIFT)
    rh = safe - kf * c(_LN2_HI)
    rl = kf * c(_LN2_LO)
    r = rh - rl
    e3, e4, e5, e6, e7 = (c(v) for v in _E)
    q = c(0.5) + r * (e3 + r * (e4 + r * (e5 + r * (e6 + r * e7))))
    one = c(1.0)
    one_hi = one + rh
    one_lo = (one - one_hi) + rh
    tail = one_lo + ((r * r) * q - rl)
    hi = one_hi + tail
    k = kf.to(torch.int64)
    k2 = torch.where(k > 127, torch.ones_like(k), torch.where(k < -126, torch.full_like(k, -64), torch.zeros_like(k)))
    y = (hi * _pow2(k - k2)) * _pow2(k2)
    y = torch.where(x > c(EXP_OVERFLOW), c(float('inf')), y)
    y = torch.where(x < c(EXP_UNDERFLOW), c(0.0), y)
    return canonical_nan(torch.where(torch.isnan(x), x, y))
