"""mx.fast.rope (traditional=True, freqs=...) and mx.fast.scaled_dot_product_attention(sinks=...) on CPU.
Both use their fallbacks (mlx/fast.cpp: rope 434-518, sdpa 718-790; backend/no_gpu/primitives.cpp).
rope: pos = f32(arange + offset)*scale; inv = f32(1/freqs); theta = f32(pos*inv); cos/sin = Cephes
  sincos (simd/math.h) in f32, ROUNDED TO x.dtype; out = (x1*c - x2*s, x1*s + x2*c) with every product
  and the sum rounded to x.dtype (bf16).
sdpa: q*bf16(scale) (bf16), scores = bf16 gemm, mask where(-> finfo.min), sinks (cast to bf16) concatenated
  as column 0, softmax(precise=True) -> bf16, drop col 0, out = bf16 gemm(probs, v)."""
import numpy as np, mlx.core as mx
from _emu import *

rng = np.random.default_rng(4)
def rope_emu(x, offset, freqs, dims):
    x = np.asarray(x, np.float32); T = x.shape[-2]
    pos = (np.arange(T, dtype=np.float32) + np.float32(offset)).astype(np.float32) * np.float32(1.0)
    with np.errstate(divide="ignore"):
        inv = (np.float32(1) / freqs.astype(np.float32)).astype(np.float32)
    th = (pos[:, None] * inv[None, :]).astype(np.float32)
    c = bf16(cephes_sincos(th, False)); s = bf16(cephes_sincos(th, True))
    x1 = x[..., 0:dims:2]; x2 = x[..., 1:dims:2]
    o1 = bf16(bf16(x1 * c) - bf16(x2 * s)); o2 = bf16(bf16(x1 * s) + bf16(x2 * c))
    out = x.copy(); out[..., 0:dims:2] = o1; out[..., 1:dims:2] = o2
    return out
head, rope_dim = 512, 64
base = 10000.0
inv_freq = (1.0 / (base ** (np.arange(0, rope_dim, 2, dtype=np.float32) / rope_dim))).astype(np.float32)
freqs = np.concatenate([np.full((head - rope_dim) // 2, np.inf, np.float32), (1.0 / inv_freq).astype(np.float32)])
for off in (0, 7, 1000, 65000):
    x = rand_bf16(rng, (1, 8, 16, head), 1)
    y = to_np(mx.fast.rope(mx_bf16(x), head, traditional=True, base=None, scale=1.0, offset=off, freqs=mx.array(freqs)))
    report(f"rope bf16 traditional freqs offset={off} (inf freqs = pass-through)", match(y, rope_emu(x, off, freqs, head)))
th = (rng.uniform(0, 3e5, 100000)).astype(np.float32)
report("mx.cos f32 = Cephes sincos (simd/math.h:60)", match(to_np(mx.cos(mx.array(th))), cephes_sincos(th, False)))
report("mx.sin f32 = Cephes sincos", match(to_np(mx.sin(mx.array(th))), cephes_sincos(th, True)))
report("  mx.cos vs correctly rounded cos (reference)", match(to_np(mx.cos(mx.array(th))), np.cos(th.astype(np.float64)).astype(np.float32)))
# SDPA with sinks, MQA (1 kv head), bool mask
def softmax_rows(s):  # precise softmax on bf16 input -> bf16
    m = s.max(-1, keepdims=True); e = cephes_exp((s - m).astype(np.float32)); n = seq_sum(e, -1)
    return bf16((e * (np.float32(1) / n).astype(np.float32)[..., None]).astype(np.float32))
B, H, L, S, D = 1, 8, 5, 23, 512
q = rand_bf16(rng, (B, H, L, D), 1); k = rand_bf16(rng, (B, 1, S, D), 1); v = rand_bf16(rng, (B, 1, S, D), 1)
sinks = rng.standard_normal(H).astype(np.float32)
mask = np.tril(np.ones((L, S), bool), k=S - L) & ~np.tril(np.ones((L, S), bool), k=S - L - 12)
scale = D ** -0.5
out = to_np(mx.fast.scaled_dot_product_attention(mx_bf16(q), mx_bf16(k), mx_bf16(v), scale=scale,
            mask=mx.array(mask), sinks=mx.array(sinks).astype(mx.bfloat16)))
qs = bf16(q * bf16(np.float32(scale)))
sc = bf16(gemm_seq(qs, np.broadcast_to(np.swapaxes(k, -1, -2), (B, H, D, S))))
fmin = np.float32(-3.3895313892515355e38)  # finfo(bf16).min
sc = np.where(mask, sc, fmin).astype(np.float32)
sk = np.broadcast_to(bf16(sinks)[None, :, None, None], (B, H, L, 1))
p = softmax_rows(np.concatenate([sk, sc], -1))[..., 1:]
emu = bf16(gemm_seq(p, np.broadcast_to(v, (B, H, S, D))))
report("sdpa bf16 + sinks + bool mask (MQA) = unfused bf16 emulation", match(out, emu))
# the same with no mask, L=1 (decode)
q1 = q[:, :, :1]
out1 = to_np(mx.fast.scaled_dot_product_attention(mx_bf16(q1), mx_bf16(k), mx_bf16(v), scale=scale, mask=None,
             sinks=mx.array(sinks).astype(mx.bfloat16)))
qs = bf16(q1 * bf16(np.float32(scale)))
sc = bf16(gemm_seq(qs, np.broadcast_to(np.swapaxes(k, -1, -2), (B, H, D, S))))
p = softmax_rows(np.concatenate([np.broadcast_to(bf16(sinks)[None, :, None, None], (B, H, 1, 1)), sc], -1))[..., 1:]
report("sdpa bf16 + sinks, L=1 decode", match(out1, bf16(gemm_seq(p, np.broadcast_to(v, (B, H, S, D))))))
print("bf16(scale) =", float(bf16(np.float32(scale))), "exact scale =", scale)
