"""quantized_matmul / gather_qmm (mxfp8, mxfp4, group 32) with bf16 x, mx.quantize's scale rule, gather_mm.
fp_qmm_t (backend/cpu/quantized.cpp:491-532, chosen because simd max_size<bf16>=1 is not %8):
  per output: T sum = 0; per group of 32: T gsum = 0; gsum += T(x*w) for each k in order (product
  rounded to T, partial sum rounded to T); sum += T(scale*gsum).  T = x dtype (bf16 -> all bf16!).
mx.quantize mxfp (ops.cpp:5101-5190 fallback): s = bf16(amax/bf16(maxval)); e = rint(bf16(log2 s));
  w' = bf16(w / 2^e); code = to_fp8(w') (RNE, e4m3) or nearest e2m1 (argmin |w'-lut|, first on tie);
  scale byte = e + 127.  DeepSeek: e = ceil(log2(amax/maxval))."""
import numpy as np, mlx.core as mx
from _emu import *

rng = np.random.default_rng(5)
FP4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
def e4m3_decode(c):
    c = c.astype(np.int64); s = np.where(c & 128, -1.0, 1.0); e = (c >> 3) & 15; m = c & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    return (s * v).astype(np.float32)
def dequant_codes(wq, sc, bits):
    wq = np.array(wq).view(np.uint8)
    if bits == 8:
        vals = e4m3_decode(wq)
    else:
        lo = wq & 15; hi = wq >> 4
        vals = FP4[np.stack([lo, hi], -1).reshape(wq.shape[0], -1)]
    sc = np.array(sc).astype(np.int64)
    scale = np.where(sc == 0, 2.0 ** -127, 2.0 ** (sc - 127.0)).astype(np.float32)
    return vals, scale
def qmm_emu(x, vals, scale, T_bf16=True):
    R = (lambda v: bf16(v)) if T_bf16 else (lambda v: np.asarray(v, np.float32))
    M, K = x.shape; N = vals.shape[0]; G = K // 32
    out = np.zeros((M, N), np.float32)
    tot = np.zeros((M, N), np.float32)
    for g in range(G):
        gs = np.zeros((M, N), np.float32)
        for kk in range(32):
            k = g * 32 + kk
            gs = R(gs + R(x[:, k:k+1] * vals[None, :, k]))
        tot = R(tot + R(gs * scale[None, :, g]))
    return tot
for mode, bits in (("mxfp8", 8), ("mxfp4", 4)):
    K, N, M = 256, 48, 3
    w = rand_bf16(rng, (N, K), 0.05)
    wq, sc = mx.quantize(mx_bf16(w), group_size=32, bits=bits, mode=mode)
    vals, scale = dequant_codes(wq, sc, bits)
    x = rand_bf16(rng, (M, K), 1)
    y = to_np(mx.quantized_matmul(mx_bf16(x), wq, sc, transpose=True, group_size=32, bits=bits, mode=mode))
    report(f"quantized_matmul {mode} bf16 x: all-bf16 fp_qmm_t emulation", match(y, qmm_emu(x, vals, scale)))
    wd = (vals.reshape(N, -1, 32) * scale[:, :, None]).reshape(N, K)
    report(f"   vs bf16(seq fp32 dot with dequantised w) [round-once model]", match(y, bf16(gemm_seq(x, wd.T))))
    x32 = rng.standard_normal((M, K)).astype(np.float32)
    y32 = to_np(mx.quantized_matmul(mx.array(x32), wq, sc, transpose=True, group_size=32, bits=bits, mode=mode))
    report(f"quantized_matmul {mode} f32 x: same loop in f32", match(y32, qmm_emu(x32, vals, scale, False)))
    # gather_qmm (switch layers) with bf16 x
    E = 4
    we = rand_bf16(rng, (E, N, K), 0.05)
    wqe, sce = mx.quantize(mx_bf16(we), group_size=32, bits=bits, mode=mode)
    idx = np.array([[2], [0], [3]], np.uint32)[:, 0]
    xg = rand_bf16(rng, (3, 1, K), 1)
    yg = to_np(mx.gather_qmm(mx_bf16(xg), wqe, sce, rhs_indices=mx.array(idx), transpose=True, group_size=32, bits=bits, mode=mode))
    emu = []
    for t in range(3):
        e = int(idx[t]); ve, se = dequant_codes(wqe[e], sce[e], bits)
        emu.append(qmm_emu(xg[t], ve, se))
    report(f"gather_qmm {mode} bf16 x: same fp_qmm_t per row", match(yg.reshape(3, -1), np.concatenate(emu).reshape(3, -1)))
# mx.quantize scale rule vs DeepSeek ceil rule
w = rand_bf16(rng, (512, 1024), 0.02)
for mode, bits, maxv in (("mxfp8", 8, 448.0), ("mxfp4", 4, 6.0)):
    wq, sc = mx.quantize(mx_bf16(w), group_size=32, bits=bits, mode=mode)
    sc = np.array(sc).astype(np.int64)
    amax = np.abs(w.reshape(-1, 32)).max(-1).reshape(sc.shape)
    s = bf16((amax / bf16(np.float32(maxv))).astype(np.float32))
    e_mlx = np.rint(bf16(libm("log2f", s))).astype(np.int64)
    e_mlx = np.where(s == 0, 0, e_mlx)
    report(f"mx.quantize {mode} scale = rint(bf16(log2(bf16(amax/{maxv})))) + 127", match(sc.astype(np.float32), (e_mlx + 127).astype(np.float32)))
    e_ds = np.ceil(np.log2(amax.astype(np.float64) / maxv)).astype(np.int64)
    print(f"   {mode}: groups whose MLX scale != DeepSeek ceil scale: {100*(sc != e_ds + 127).mean():.2f}%")
# gather_mm dtype support
try:
    mx.eval(mx.gather_mm(mx_bf16(rand_bf16(rng, (3, 1, 64))), mx_bf16(rand_bf16(rng, (4, 64, 16))), rhs_indices=mx.array(np.array([1, 0, 3], np.uint32))))
    print("gather_mm bf16: OK")
except Exception as ex:
    print("gather_mm bf16 raises:", ex)
xa = rng.standard_normal((3, 1, 64)).astype(np.float32); wa = rng.standard_normal((4, 64, 16)).astype(np.float32)
yg = to_np(mx.gather_mm(mx.array(xa), mx.array(wa), rhs_indices=mx.array(np.array([1, 0, 3], np.uint32))))
ref = np.stack([mx.array(xa[t]) @ mx.array(wa[e]) for t, e in enumerate([1, 0, 3])])
report("gather_mm f32 == per-row f32 matmul (sgemm)", match(yg, to_np(ref)))
