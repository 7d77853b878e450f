"""The ops of oMLX's cache path (window kv, Compressor pools) not covered by the other probes.

1. quantized_matmul affine, 8 bits, group 64, transpose=True, bf16 x (the compressor's and the
   indexer compressor's wkv/wgate). simd max_size<bf16> = 1 is not a multiple of the pack factor,
   so backend/cpu/quantized.cpp:153-206 `_qmm_t` runs: per output, T sum = 0; for k in order:
   sum += x * (scale * T(code) + bias), T = bf16, every op rounded to bf16 (no group sum).
2. FromFP8 (unary_ops.h:154): e4m3 code c -> fp16 bits (c & 127) << 7, times 256, sign from bit 7;
   code 0x7F is 480, not NaN.
3. DeepseekV4RoPE's freqs in float32 mx ops: base ** (arange/dims) is std::pow(float, float), i.e.
   glibc powf; our TypeScript rounds a double pow to float32. Checked on the exponents the model
   uses and on random ones; then the YaRN blend and 1/inv, f/ratio against MLX's own arrays.
4. The model's own compiled _overlap_compress_kv / _simple_compress_kv against the composed rule.
"""
import math
import os
import sys

import numpy as np
import mlx.core as mx
from _emu import *

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", ".omlx", "site")]
sys.path.insert(0, os.path.join(HERE, ".."))
import omlx_install  # noqa: E402,F401
from mlx_lm.models import deepseek_v4 as dsv4  # noqa: E402

rng = np.random.default_rng(11)


# 1. affine 8-bit g64
def affine_emu(x, codes, scales, biases):
    M, K = x.shape
    N = codes.shape[0]
    out = np.zeros((M, N), np.float32)
    for m in range(M):
        for n in range(N):
            s = f32(0)
            for k in range(K):
                g = k // 64
                w = bf16(bf16(scales[n, g] * f32(codes[n, k])) + biases[n, g])
                s = bf16(s + bf16(x[m, k] * w))
            out[m, n] = s
    return out


def affine_round_once(x, codes, scales, biases):
    w = (scales.repeat(64, 1) * codes + biases.repeat(64, 1)).astype(np.float32)
    return bf16(gemm_seq(x, w.T))


for K, N, M in ((256, 24, 3), (128, 16, 2)):
    w = rand_bf16(rng, (N, K), 0.05)
    wq, sc, bi = mx.quantize(mx_bf16(w), group_size=64, bits=8, mode="affine")
    codes = np.array(wq).view(np.uint8).reshape(N, K).astype(np.float32)
    scales, biases = to_np(sc), to_np(bi)
    x = rand_bf16(rng, (M, K), 1)
    y = to_np(mx.quantized_matmul(mx_bf16(x), wq, sc, bi, transpose=True, group_size=64, bits=8, mode="affine"))
    report(f"quantized_matmul affine8 g64 bf16 x K={K}: all-bf16 _qmm_t (x*(s*q+b), seq bf16 sum)", match(y, affine_emu(x, codes, scales, biases)))
    report(f"   vs round-once: bf16(seq f32 dot with f32 s*q+b)", match(y, affine_round_once(x, codes, scales, biases)))
    report(f"mx.quantize affine: scales, biases bf16 (dtype check)", (1.0 if sc.dtype == mx.bfloat16 and bi.dtype == mx.bfloat16 else 0.0, 0, 1))

# 2. FromFP8 for every code, through a quantized_matmul with x = one-hot and scale byte 127 (2^0).
codes = np.arange(256, dtype=np.uint8).reshape(8, 32)
wq = mx.array(codes.reshape(8, 8, 4).view(np.uint32).reshape(8, 8))
sc = mx.array(np.full((8, 1), 127, np.uint8))
got = []
for j in range(32):
    x = np.zeros((1, 32), np.float32)
    x[0, j] = 1
    got.append(to_np(mx.quantized_matmul(mx_bf16(x), wq, sc, transpose=True, group_size=32, bits=8, mode="mxfp8"))[0])
got = np.stack(got, 1)  # [8 rows, 32 cols] = code value
f16 = ((codes.astype(np.uint16) & 127) << 7).view(np.float16).astype(np.float32) * 256
emu = np.where(codes & 128, -f16, f16).astype(np.float32)
# A sum that starts from +0 turns the decoded -0 (code 0x80) into +0: add +0 on our side too.
report("FromFP8 e4m3 decode, all 256 codes (0x7F -> 480, 0xFF -> -480)", match(got, bf16(emu) + f32(0)))

# 3. freqs.  powf: glibc against a double pow rounded once.
for base, dims in ((10000.0, 64), (160000.0, 64), (10000.0, 32), (160000.0, 128), (10000.0, 256)):
    e = (np.arange(0, dims, 2, dtype=np.float32) / f32(dims)).astype(np.float32)
    mine = np.array([np.float32(math.pow(base, float(v))) for v in e], np.float32)
    got = to_np(mx.power(mx.array(base, mx.float32), mx.array(e)))
    report(f"mx.power({base:g}, arange(0,{dims},2)/{dims}) = f32(double pow)", match(got, mine))
xs = rng.uniform(0, 1, 200000).astype(np.float32)
for base in (10000.0, 160000.0):
    mine = np.array([np.float32(math.pow(base, float(v))) for v in xs], np.float32)
    got = to_np(mx.power(mx.array(base, mx.float32), mx.array(xs)))
    report(f"mx.power({base:g}, U(0,1) x 200000) = f32(double pow)", match(got, mine))

# The whole DeepseekV4RoPE freqs for the configs of our presets.
def freqs_emu(dims, base, scaling, ratio):
    e = (np.arange(0, dims, 2, dtype=np.float32) / f32(dims)).astype(np.float32)
    p = np.array([np.float32(math.pow(base, float(v))) for v in e], np.float32)
    inv = (f32(1.0) / p).astype(np.float32)
    if scaling is not None:
        fac, orig = scaling["factor"], scaling["original_max_position_embeddings"]
        bf, bs = scaling["beta_fast"], scaling["beta_slow"]
        cd = lambda r: dims * math.log(orig / (r * 2 * math.pi)) / (2 * math.log(base))
        low = max(math.floor(cd(bf)), 0)
        high = min(math.ceil(cd(bs)), dims - 1)
        if low == high:
            high += 0.001
        ramp = ((np.arange(dims // 2, dtype=np.float32) - f32(low)).astype(np.float32) / f32(high - low)).astype(np.float32)
        smooth = (f32(1) - np.clip(ramp, f32(0), f32(1))).astype(np.float32)
        a = ((inv / f32(fac)).astype(np.float32) * (f32(1) - smooth).astype(np.float32)).astype(np.float32)
        inv = (a + (inv * smooth).astype(np.float32)).astype(np.float32)
    f = (f32(1.0) / inv).astype(np.float32)
    if ratio != 1:
        f = (f / f32(ratio)).astype(np.float32)
    return f


yarn = {"type": "yarn", "factor": 32, "original_max_position_embeddings": 1024, "beta_fast": 32, "beta_slow": 1}
for base, scaling, ratio in ((10000.0, None, 1), (160000.0, yarn, 1), (160000.0, yarn, 4), (160000.0, yarn, 128)):
    r = dsv4.DeepseekV4RoPE(64, base, scaling, 32768, freq_scale=ratio)
    got = to_np(r._get_freqs(128, False))
    emu = np.concatenate([np.full(32, np.inf, np.float32), freqs_emu(64, base, scaling, ratio)])
    report(f"DeepseekV4RoPE freqs base {base:g} yarn={scaling is not None} ratio {ratio}", match(got, emu))

# 4. The model's compiled pooling functions against the composed rule.
def softmax_axis(g):  # over axis 0 of [rows, C], f32 in, true divide
    mxv = g.max(0, keepdims=True)
    e = cephes_exp((g - mxv).astype(np.float32))
    s = seq_sum(e, axis=0)
    return (e / s).astype(np.float32)


def overlap_emu(kv, gate, ape):  # kv, gate [W, 4, 2D] bf16-valued; ape [4, 2D] bf16-valued
    W, R, D2 = kv.shape
    D = D2 // 2
    gate = bf16(gate + ape)
    out = np.zeros((W, D), np.float32)
    for w in range(W):
        ka = kv[w - 1, :, :D] if w > 0 else np.zeros((R, D), np.float32)
        ga = gate[w - 1, :, :D] if w > 0 else np.full((R, D), -np.inf, np.float32)
        k = np.concatenate([ka, kv[w, :, D:]], 0)
        g = np.concatenate([ga, gate[w, :, D:]], 0)
        p = bf16(softmax_axis(g))
        out[w] = seq_sum(bf16(k * p), axis=0, acc_bf16=True)
    return out


def simple_emu(kv, gate, ape):
    W = kv.shape[0]
    out = np.zeros((W, kv.shape[2]), np.float32)
    for w in range(W):
        p = bf16(softmax_axis((gate[w] + ape).astype(np.float32)))
        out[w] = seq_sum(bf16(kv[w] * p), axis=0, acc_bf16=True)
    return out


kv = rand_bf16(rng, (6, 4, 64), 1)
gate = rand_bf16(rng, (6, 4, 64), 2)
ape = rand_bf16(rng, (4, 64), 0.5)
got = to_np(dsv4._overlap_compress_kv(mx_bf16(kv)[None], mx_bf16(gate)[None], mx_bf16(ape), 32))[0]
report("_overlap_compress_kv (compiled, bf16): composed rule", match(got, overlap_emu(kv, gate, ape)))
kv = rand_bf16(rng, (2, 128, 32), 1)
gate = rand_bf16(rng, (2, 128, 32), 2)
ape = rand_bf16(rng, (128, 32), 0.5)
got = to_np(dsv4._simple_compress_kv(mx_bf16(kv)[None], mx_bf16(gate)[None], mx_bf16(ape), 32))[0]
report("_simple_compress_kv (compiled, bf16 kv, bf16 ape): composed rule", match(got, simple_emu(kv, gate, ape)))

# 5. Digests for the MLX-free TypeScript checks (suites/mlx/capture-mlx-cpu.test.ts): sha256 of the
# float32 bytes MLX returns on inputs both sides build the same way (a double formula cast to f32).
import hashlib


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(np.asarray(a, np.float32)).tobytes()).hexdigest()


i = np.arange(100001, dtype=np.float64)
x_exp = ((i - 50000) * 0.0019).astype(np.float32)   # [-95, 95]
x_sin = ((i - 50000) * 0.013).astype(np.float32)    # [-650, 650]
got_exp = to_np(mx.exp(mx.array(x_exp)))
got_sin, got_cos = to_np(mx.sin(mx.array(x_sin))), to_np(mx.cos(mx.array(x_sin)))
report("mx.exp on the digest inputs = cephes_exp emulation", match(got_exp, cephes_exp(x_exp)))
report("mx.sin on the digest inputs = cephes sincos emulation", match(got_sin, cephes_sincos(x_sin, True)))
report("mx.cos on the digest inputs = cephes sincos emulation", match(got_cos, cephes_sincos(x_sin, False)))
print(f"digest exp x=(i-50000)*0.0019, i<=100000: {digest(got_exp)}")
print(f"digest sin x=(i-50000)*0.013: {digest(got_sin)}")
print(f"digest cos x=(i-50000)*0.013: {digest(got_cos)}")
for base, scaling, ratio in ((10000.0, None, 1), (160000.0, yarn, 1), (160000.0, yarn, 4), (160000.0, yarn, 128)):
    r = dsv4.DeepseekV4RoPE(64, base, scaling, 32768, freq_scale=ratio)
    print(f"digest freqs dims 64 head 128 base {base:g} yarn={scaling is not None} ratio {ratio}: {digest(to_np(r._get_freqs(128, False)))}")
