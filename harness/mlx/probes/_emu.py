"""Shared numpy emulation of MLX 0.32.2 CPU-backend arithmetic (x86-64 build, simd max_size=1).

Every helper works on np.float32 arrays and rounds exactly where the MLX C++ rounds.
Run probes with PYTHONPATH=/work/main/harness/mlx/.work/python python3 <probe>.py
"""
import numpy as np
import mlx.core as mx

f32 = np.float32


def bf16(x):
    """Round float32 -> bf16 (returned as float32): mlx/types/bf16.h _MLX_BFloat16(float),
    in.u += (in.u >> 16 & 1) + 0x7FFF; bits = in.u >> 16; NaN -> 0x7FC0."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint32)
    r = (u + ((u >> 16) & 1) + np.uint32(0x7FFF)) & np.uint32(0xFFFF0000)
    r = np.where(np.isnan(x), np.uint32(0x7FC00000), r).astype(np.uint32)
    return r.view(np.float32)


def to_np(a):
    """mx array -> float32 numpy (bf16 widening is exact)."""
    if a.dtype in (mx.bfloat16, mx.float16):
        a = a.astype(mx.float32)
    return np.array(a, copy=True)


def bits(a):
    a = np.asarray(a, dtype=np.float32)
    return a.view(np.uint32)


def match(a, b):
    """Fraction of bit-identical float32 elements (NaN==NaN counts as equal)."""
    a = np.asarray(a, dtype=np.float32).ravel()
    b = np.asarray(b, dtype=np.float32).ravel()
    eq = (bits(a) == bits(b)) | (np.isnan(a) & np.isnan(b))
    return float(eq.mean()), int((~eq).sum()), a.size


def rand_bf16(rng, shape, scale=1.0):
    return bf16((rng.standard_normal(shape) * scale).astype(np.float32))


def mx_bf16(x):
    return mx.array(np.asarray(x, dtype=np.float32)).astype(mx.bfloat16)


def fma32(a, b, c):
    """float32 fma via float64: a*b is exact in double, one double rounding of the add then one
    float rounding (double rounding risk ~2^-29 per call, negligible)."""
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(np.float32) if np.ndim(a) == 0 else \
        (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float32)


def cephes_exp(x_init):
    """mlx/backend/cpu/simd/math.h simd::exp (Cephes 2^x polynomial with fma), float32 out."""
    x_init = np.asarray(x_init, dtype=np.float32)
    with np.errstate(all="ignore"):
        x = x_init * f32(1.442695)
        ipart = np.floor(x.astype(np.float64) + 0.5).astype(np.float32)
        fpart = (x - ipart).astype(np.float32)
        p = np.full(x.shape, f32(1.535336188319500e-4), np.float32)
        for c in (1.339887440266574e-3, 9.618437357674640e-3, 5.550332471162809e-2,
                  2.402264791363012e-1, 6.931472028550421e-1, 1.000000000000000):
            p = fma32(p, fpart, f32(c))
        ip = np.nan_to_num(ipart, nan=0, posinf=0, neginf=0).astype(np.int64)
        epart = (((ip + 127) << 23) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
        res = (epart * p).astype(np.float32)
        res = np.where(np.isnan(x_init), x_init, res)
        res = np.where(x_init > 88.0, np.float32(np.inf), res)
        res = np.where(x_init < -88.0, np.float32(0), res)
    return res.astype(np.float32)


def cephes_sincos(x, sine):
    """mlx/backend/cpu/simd/math.h sincos<Sine> (float32), |x| <= 2^23 path."""
    x = np.asarray(x, dtype=np.float32)
    sign_sin = x < 0
    ax = np.abs(x)
    y = (ax * f32(1.27323954473516)).astype(np.float32)
    emm2 = y.astype(np.uint32)
    emm2 = (emm2 + np.uint32(1)) & ~np.uint32(1)
    y = emm2.astype(np.float32)
    poly = (emm2 & np.uint32(2)) != 0
    xx = fma32(y, f32(-0.78515625), ax)
    xx = fma32(y, f32(-2.4187564849853515625e-4), xx)
    xx = fma32(y, f32(-3.77489497744594108e-8), xx)
    sign_sin = sign_sin ^ ((emm2 & np.uint32(4)) != 0)
    sign_cos = ((emm2 - np.uint32(2)) & np.uint32(4)) != 0
    z = (xx * xx).astype(np.float32)
    y1 = fma32(z, f32(2.443315711809948e-5), f32(-1.388731625493765e-3))
    y2 = fma32(z, f32(-1.9515295891e-4), f32(8.3321608736e-3))
    y1 = fma32(y1, z, f32(4.166664568298827e-2))
    y2 = fma32(y2, z, f32(-1.6666654611e-1))
    y1 = (y1 * z).astype(np.float32)
    y2 = (y2 * z).astype(np.float32)
    y1 = (y1 * z).astype(np.float32)
    y2 = fma32(xx, y2, xx)
    y1 = fma32(z, f32(-0.5), y1)
    y1 = (y1 + f32(1.0)).astype(np.float32)
    if sine:
        ys = np.where(poly, y1, y2)
        return np.where(sign_sin, -ys, ys).astype(np.float32)
    yc = np.where(poly, y2, y1)
    return np.where(sign_cos, yc, -yc).astype(np.float32)


def seq_sum(v, axis=-1, acc_bf16=False):
    """Sequential left-to-right sum from +0 along axis (MLX CPU reduce with N=1 lanes).
    acc_bf16: the accumulator is bf16 and every partial sum is rounded to bf16."""
    v = np.moveaxis(np.asarray(v, np.float32), axis, -1)
    acc = np.zeros(v.shape[:-1], np.float32)
    for k in range(v.shape[-1]):
        acc = (acc + v[..., k]).astype(np.float32)
        if acc_bf16:
            acc = bf16(acc)
    return acc


def gemm_seq(a, b):
    """simd_gemm<bfloat16_t, float> with simd size 1: out[i,j] = bf16(sum_k a[i,k]*b[k,j])
    summed sequentially in float32 from k=0 (a, b already bf16-valued float32)."""
    a = np.asarray(a, np.float32); b = np.asarray(b, np.float32)
    acc = np.zeros(a.shape[:-1] + b.shape[-1:], np.float32)
    for k in range(a.shape[-1]):
        acc = (acc + (a[..., :, k:k + 1] * b[..., k:k + 1, :]).astype(np.float32)).astype(np.float32)
    return acc


def lanes8(a, b):
    """Our project's 'lanes8' dot order (docs/kernels.md): 8 float32 lanes over k//8*8, lane l
    takes k = 8i + l in order; lanes reduced ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)) (src/kernels/order.ts:31); then the k%8
    tail is added sequentially.  a: [..., M, K], b: [K, N]. Returns float32."""
    a = np.asarray(a, np.float32); b = np.asarray(b, np.float32)
    K = a.shape[-1]
    full = (K // 8) * 8
    lanes = [np.zeros(a.shape[:-1] + b.shape[-1:], np.float32) for _ in range(8)]
    for k in range(full):
        l = k % 8
        lanes[l] = (lanes[l] + (a[..., :, k:k + 1] * b[k:k + 1, :]).astype(np.float32)).astype(np.float32)
    s4 = [(lanes[i] + lanes[i + 4]).astype(np.float32) for i in range(4)]  # l0+l4, l1+l5, l2+l6, l3+l7
    s = ((s4[0] + s4[2]).astype(np.float32) + (s4[1] + s4[3]).astype(np.float32)).astype(np.float32)
    for k in range(full, K):
        s = (s + (a[..., :, k:k + 1] * b[k:k + 1, :]).astype(np.float32)).astype(np.float32)
    return s


def report(name, m):
    rate, bad, n = m
    print(f"{name:70s} {100*rate:8.4f}%  ({n-bad}/{n})")
    return rate


import ctypes as _ct
_libm = _ct.CDLL("libm.so.6")
for _n in ("logf", "log1pf", "expf", "sqrtf", "log2f"):
    getattr(_libm, _n).restype = _ct.c_float
    getattr(_libm, _n).argtypes = [_ct.c_float]


def libm(name, x):
    """Call glibc's float function (what std::log / std::log1p on float compile to) elementwise."""
    f = getattr(_libm, name)
    x = np.asarray(x, np.float32)
    return np.array([f(float(v)) for v in x.ravel()], np.float32).reshape(x.shape)


def logaddexp_emu(x, y):
    """binary_ops.h LogAddExp (float32): max + log1p(simd::exp(min - max)), log1p = glibc log1pf."""
    x = np.asarray(x, np.float32); y = np.asarray(y, np.float32)
    mxv = np.maximum(x, y); mnv = np.minimum(x, y)
    with np.errstate(all="ignore"):
        out = (mxv + libm("log1pf", cephes_exp((mnv - mxv).astype(np.float32)))).astype(np.float32)
    return np.where((mnv == -np.inf) | (mxv == np.inf), mxv, out).astype(np.float32)
