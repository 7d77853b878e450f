"""mx.quantize on the CPU for bf16 weights, the rules src/numerics/mlx-cpu/quantize.ts ports:
mxfp8 g32 (ops.cpp:5101-5190 fallback, bf16 ops): s = bf16(amax / bf16(448)); e = s == 0 ? 0 :
  rint(bf16(log2f(s))); w' = bf16(w / bf16(2^e)); code = ToFP8(w') (unary_ops.h:120); byte e + 127.
affine (backend/cpu/quantized.cpp:1149 fast::Quantize::eval_cpu, float32 throughout):
  scale = max((max - min)/n_bins, 1e-7) (negated unless |min| > |max|), edge, q0 = rint(edge/scale),
  q0 != 0: scale = edge/q0, bias = edge; q = clamp(rint((w - bias)/scale), 0, n_bins) with the f32
  scale; stored scale/bias = bf16.
Also prints the sha256 digests of MLX's outputs on LCG-generated weights that suites/mlx/quantize.test.ts
recomputes in TypeScript."""
import hashlib
import numpy as np
import mlx.core as mx
from _emu import *

rng = np.random.default_rng(11)


def rint(x):
    return np.rint(x)  # numpy rint: nearest, ties to even (as std::rint)


def to_fp8(x):
    """detail::ToFP8 on float32 values."""
    x = np.asarray(x, np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    sign = b & 0x80000000
    f = b ^ sign
    denorm = np.uint64(141 << 23)
    low = (f.astype(np.uint32).view(np.float32) + np.uint32(141 << 23).view(np.float32)).astype(np.float32)
    low = ((low.view(np.uint32).astype(np.uint64) - denorm) & 0xFFFFFFFF) & 0xFF
    mant_odd = (f >> 20) & 1
    high = ((f + (((7 - 127) << 23) & 0xFFFFFFFF) + 0x7FFFF + mant_odd) & 0xFFFFFFFF) >> 20 & 0xFF
    r = np.where(f < (121 << 23), low, high)
    r = np.where(f >= (543 << 21), 0x7E, r)
    return (r | (sign >> 24)).astype(np.uint8)


def mxfp8_emu(w):
    g = w.reshape(-1, 32)
    amax = np.abs(g).max(-1, keepdims=True)
    s = bf16((amax / np.float32(448)).astype(np.float32))
    with np.errstate(divide="ignore"):
        e = np.where(s == 0, 0, rint(bf16(np.log2(s.astype(np.float64)).astype(np.float32)))).astype(np.int64)
    p2 = bf16(np.float32(2.0) ** e.astype(np.float32))
    with np.errstate(divide="ignore"):
        wq = bf16((g / p2).astype(np.float32))
    codes = to_fp8(wq).reshape(w.shape)
    return codes.view(np.uint32).reshape(w.shape[0], -1), ((e + 127) & 0xFF).astype(np.uint8).reshape(w.shape[0], -1)


def affine_emu(w, bits, gs):
    nb = np.float32((1 << bits) - 1)
    g = w.reshape(-1, gs).astype(np.float32)
    wmax, wmin = g.max(-1), g.min(-1)
    mask = np.abs(wmin) > np.abs(wmax)
    with np.errstate(all="ignore"):
        scale = np.maximum(((wmax - wmin).astype(np.float32) / nb).astype(np.float32), np.float32(1e-7))
        scale = np.where(mask, scale, -scale).astype(np.float32)
        edge = np.where(mask, wmin, wmax).astype(np.float32)
        q0 = rint((edge / scale).astype(np.float32))
        scale = np.where(q0 != 0, (edge / q0).astype(np.float32), scale).astype(np.float32)
        bias = np.where(q0 != 0, edge, np.float32(0)).astype(np.float32)
        q = rint(((g - bias[:, None]).astype(np.float32) / scale[:, None]).astype(np.float32))
    q = np.clip(q, 0, nb).astype(np.uint64).reshape(-1, 32 // bits)
    words = np.zeros(q.shape[0], np.uint64)
    for k in range(32 // bits):
        words |= q[:, k] << np.uint64(k * bits)
    return (words.astype(np.uint32).reshape(w.shape[0], -1), bf16(scale).reshape(w.shape[0], -1),
            bf16(bias).reshape(w.shape[0], -1))


def check_mx(name, w):
    wq, sc = mx.quantize(mx_bf16(w), group_size=32, bits=8, mode="mxfp8")
    ew, es = mxfp8_emu(w)
    a, b = np.array(wq), np.array(sc)
    print(f"{name}: mxfp8 words {100*(a == ew).mean():.3f} % ({(a != ew).sum()} differ of {a.size}), "
          f"scales {100*(b == es).mean():.3f} % ({(b != es).sum()} differ of {b.size})")


def check_affine(name, w, bits=8, gs=64):
    wq, sc, bi = mx.quantize(mx_bf16(w), group_size=gs, bits=bits, mode="affine")
    ew, es, eb = affine_emu(w, bits, gs)
    a = np.array(wq)
    print(f"{name}: affine{bits} g{gs} words {100*(a == ew).mean():.3f} % ({(a != ew).sum()} differ of {a.size}), "
          f"scales {100*match(to_np(sc), es)[0]:.3f} %, biases {100*match(to_np(bi), eb)[0]:.3f} %")


# Every positive finite bf16 as a group's amax (exhaustive for the exponent rule), the rest of the
# group |x| <= amax, both signs.
amax = np.arange(1, 0x7F80, dtype=np.uint32).astype(np.uint32) << 16
amax = amax.view(np.float32)
g = bf16((amax[:, None] * rng.uniform(-1, 1, (amax.size, 32))).astype(np.float32))
g[:, 0] = amax * np.where(rng.random(amax.size) < 0.5, -1, 1)
check_mx("every bf16 amax", g)
for scale in (1e-3, 0.02, 0.125, 1.0, 300.0):
    w = rand_bf16(rng, (256, 512), scale)
    check_mx(f"N(0,{scale})", w)
    for bits, gs in ((8, 64), (8, 32), (8, 128), (4, 64), (2, 64)):
        check_affine(f"N(0,{scale})", w, bits, gs)
# affine corner groups: constant, zero, one outlier, tiny spreads (q0 = 0), mixed signs with ties.
w = np.zeros((8, 64 * 6), np.float32)
w[:, 64:128] = 0.5
w[:, 128:192] = bf16(1 + rng.integers(0, 3, (8, 64)) * 2.0 ** -7)
w[:, 192:256] = rand_bf16(rng, (8, 64), 1e-6)
w[:, 256:320] = bf16(rng.integers(-4, 5, (8, 64)).astype(np.float32) * 0.25)
w[:, 320:384] = rand_bf16(rng, (8, 64), 1)
w[:, 320] = 100
check_affine("corner groups", w)


def lcg_bf16(n, seed, exp_lo, exp_span):
    """bf16 values from a 32-bit LCG: sign and 7 mantissa bits random, exponent exp_lo + (r % exp_span)."""
    out = np.zeros(n, np.uint32)
    s = seed
    for i in range(n):
        s = (s * 1103515245 + 12345) & 0xFFFFFFFF
        hi = s >> 16
        out[i] = ((hi & 0x8000) | ((exp_lo + ((hi >> 7) % exp_span)) << 7) | (hi & 0x7F)) << 16
    return out.view(np.float32)


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def bf16_codes(a):
    return (np.array(a.astype(mx.float32)).view(np.uint32) >> 16).astype(np.uint16)


w = lcg_bf16(64 * 1024, 7, 1, 254).reshape(64, 1024)
wq, sc = mx.quantize(mx_bf16(w), group_size=32, bits=8, mode="mxfp8")
check_mx("LCG full exponent range", w)
print(f"digest mxfp8 lcg(seed 7, exp 1..254) [64,1024]: words {digest(np.array(wq))} scales {digest(np.array(sc))}")
w = lcg_bf16(64 * 1024, 9, 112, 16).reshape(64, 1024)
wq, sc, bi = mx.quantize(mx_bf16(w), group_size=64, bits=8, mode="affine")
check_affine("LCG exp 112..127", w)
print(f"digest affine8 g64 lcg(seed 9, exp 112..127) [64,1024]: words {digest(np.array(wq))} "
      f"scales {digest(bf16_codes(sc))} biases {digest(bf16_codes(bi))}")
