"""mx.fast.rms_norm / nn.RMSNorm, sum/mean, softmax (precise / not, last axis / other axis), logsumexp.
fast.rms_norm on CPU = fallback (mlx/fast.cpp:90-120, no_gpu use_fallback=true):
  x32 = f32(x); ms = sum(x32*x32) * f32(1/D)   [mean = sum * normalizer, ops.cpp:2337]
  r = 1/sqrt(ms + eps) [rsqrt = 1/sqrt]; y = astype(x32*r, out_type); then y * weight in out_type.
sum: reduce.cpp reduction_op<T,T,SumReduce>: accumulator of the INPUT dtype, sequential from 0
  (bf16 sum rounds every partial sum to bf16).
softmax last axis: softmax.cpp: max and exp(x-max) in AccT (f32 if precise or f32 input, bf16 otherwise),
  sequential AccT normalizer, r = 1/normalizer, out = T(exp(x-max) * r).
softmax other axis: ops.cpp:4110 composed: astype f32 (precise), max, exp(sub), sum, divide, astype."""
import numpy as np, mlx.core as mx, mlx.nn as nn
from _emu import *

rng = np.random.default_rng(3)
def rms_emu(x, w, eps, out_bf16=True):
    x32 = np.asarray(x, np.float32); D = x32.shape[-1]
    ss = seq_sum((x32 * x32).astype(np.float32))
    ms = (ss * np.float32(1.0 / D)).astype(np.float32)
    r = (np.float32(1) / np.sqrt((ms + np.float32(eps)).astype(np.float32))).astype(np.float32)
    y = (x32 * r[..., None]).astype(np.float32)
    if out_bf16:
        y = bf16(y)
        return y if w is None else bf16(y * w)
    return y if w is None else (y * w).astype(np.float32)
def rms_ours(x, w, eps):   # docs/kernels.md RMSNorm: lanes8 ss, ss/d, bf16(f32(x*r)*w) (engine rounds once)
    x32 = np.asarray(x, np.float32); D = x32.shape[-1]
    ss = lanes8(x32, np.eye(1, dtype=np.float32)) if False else None
    ss = np.array([lanes8(row[None], row[:, None])[0, 0] for row in x32.reshape(-1, D)], np.float32).reshape(x32.shape[:-1])
    ms = (ss / np.float32(D)).astype(np.float32)
    r = (np.float32(1) / np.sqrt((ms + np.float32(eps)).astype(np.float32))).astype(np.float32)
    y = (x32 * r[..., None]).astype(np.float32)
    return bf16(y) if w is None else bf16((y * w).astype(np.float32))
for D in (512, 1024, 4096):
    x = rand_bf16(rng, (64, D), 2); w = rand_bf16(rng, D, 0.5) + np.float32(1); w = bf16(w)
    norm = nn.RMSNorm(D, eps=1e-6); norm.weight = mx_bf16(w)
    y = to_np(norm(mx_bf16(x)))
    report(f"nn.RMSNorm bf16 D={D}: bf16(bf16(x*r)*w)", match(y, rms_emu(x, w, 1e-6)))
    report(f"   vs our rmsNorm rule bf16(f32(x*r)*w), lanes8 ss", match(y, rms_ours(x, w, 1e-6)))
    y0 = to_np(mx.fast.rms_norm(mx_bf16(x), None, 1e-6))
    report(f"fast.rms_norm(weight=None) bf16 D={D}", match(y0, rms_emu(x, None, 1e-6)))
xf = rng.standard_normal((16, 16384)).astype(np.float32)
report("fast.rms_norm f32 (hc: D=16384, no weight) -> f32", match(to_np(mx.fast.rms_norm(mx.array(xf), None, 1e-6)), rms_emu(xf, None, 1e-6, False)))
# reductions
v = rand_bf16(rng, (32, 300), 1); V = mx_bf16(v)
report("sum(bf16, axis=-1) = sequential bf16 accumulator", match(to_np(V.sum(axis=-1)), seq_sum(v, -1, True)))
report("   vs fp32 accumulate, round once", match(to_np(V.sum(axis=-1)), bf16(seq_sum(v, -1))))
v3 = rand_bf16(rng, (8, 4, 128, 64), 1); V3 = mx_bf16(v3)
report("sum(bf16, axis=-2) strided = sequential bf16", match(to_np(V3.sum(axis=-2)), seq_sum(v3, -2, True)))
vf = rng.standard_normal((32, 3000)).astype(np.float32)
report("sum(f32, axis=-1) = sequential f32", match(to_np(mx.array(vf).sum(axis=-1)), seq_sum(vf, -1)))
report("mean(f32) = seq_sum * f32(1/N)", match(to_np(mx.mean(mx.array(vf), axis=-1)), (seq_sum(vf, -1) * np.float32(1/3000)).astype(np.float32)))
# softmax
def sm_emu(x, acc_bf16, out_bf16):
    x = np.asarray(x, np.float32)
    m = x.max(-1, keepdims=True)
    d = (x - m).astype(np.float32)
    if acc_bf16:
        d = bf16(d); e = bf16(cephes_exp(d)); nrm = seq_sum(e, -1, True); r = bf16(np.float32(1) / nrm)
        return bf16(e * r[..., None])
    e = cephes_exp(d); nrm = seq_sum(e, -1); r = (np.float32(1) / nrm).astype(np.float32)
    o = (e * r[..., None]).astype(np.float32)
    return bf16(o) if out_bf16 else o
s = rand_bf16(rng, (64, 77), 4); S = mx_bf16(s)
report("softmax bf16 precise=True (f32 internals)", match(to_np(mx.softmax(S, axis=-1, precise=True)), sm_emu(s, False, True)))
report("softmax bf16 precise=False (ALL bf16: sub, exp, sum, 1/n, mul)", match(to_np(mx.softmax(S, axis=-1)), sm_emu(s, True, True)))
sf = (rng.standard_normal((64, 256)) * 3).astype(np.float32)
report("softmax f32 last axis", match(to_np(mx.softmax(mx.array(sf), axis=-1, precise=True)), sm_emu(sf, False, False)))
def sm_axis_emu(x, axis, out_bf16):
    x = np.moveaxis(np.asarray(x, np.float32), axis, -1)
    m = x.max(-1, keepdims=True); e = cephes_exp((x - m).astype(np.float32)); nrm = seq_sum(e, -1)
    o = (e / nrm[..., None]).astype(np.float32)
    o = bf16(o) if out_bf16 else o
    return np.moveaxis(o, -1, axis)
g = (rng.standard_normal((2, 10, 4, 64)) * 2).astype(np.float32)
report("softmax f32 axis=-2 (compressor) = composed exp/sum/DIVIDE", match(to_np(mx.softmax(mx.array(g), axis=-2)), sm_axis_emu(g, -2, False)))
gb = rand_bf16(rng, (2, 10, 8, 64), 2)
report("softmax bf16 axis=-2 precise (overlap compressor) -> bf16", match(to_np(mx.softmax(mx_bf16(gb), axis=-2, precise=True)), sm_axis_emu(gb, -2, True)))
# logsumexp
def lse_emu(x):
    x = np.asarray(x, np.float32); m = x.max(-1); e = cephes_exp((x - m[..., None]).astype(np.float32))
    return (libm("logf", seq_sum(e, -1)) + m).astype(np.float32)
report("logsumexp f32 = logf(seq sum cephes_exp) + max", match(to_np(mx.logsumexp(mx.array(sf), axis=-1)), lse_emu(sf)))
