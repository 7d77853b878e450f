"""nn.Linear / x @ w.T on the CPU: bf16 x bf16 -> bf16.
Claim: mlx/backend/cpu/gemms/simd_bf16.cpp -> simd_gemm<bfloat16_t,float> (simd_gemm.h): products of
widened bf16 values (exact in f32), ONE float32 accumulator per output, k summed sequentially from
k=0 (16-wide k blocks, simd size 1 -> plain order), one rounding to bf16 at the store.
fp32 (and promoted bf16 x fp32) goes to OpenBLAS cblas_sgemm (gemms/cblas.cpp) -> order is OpenBLAS's."""
import numpy as np, mlx.core as mx, mlx.nn as nn
from _emu import *

rng = np.random.default_rng(0)
for (M, K, N) in [(1, 64, 32), (3, 100, 17), (7, 512, 64), (2, 4096, 16), (5, 33, 9)]:
    x = rand_bf16(rng, (M, K)); w = rand_bf16(rng, (N, K), 0.05)
    lin = nn.Linear(K, N, bias=False); lin.weight = mx_bf16(w)
    y = to_np(lin(mx_bf16(x)))
    emu = bf16(gemm_seq(x, w.T))
    report(f"Linear bf16 M={M} K={K} N={N}: bf16(seq fp32 sum)", match(y, emu))
    report(f"   same vs bf16(lanes8) [our profiles]", match(y, bf16(lanes8(x, w.T))))
    report(f"   same vs bf16(float64 exact sum)", match(y, bf16((x.astype(np.float64) @ w.T.astype(np.float64)).astype(np.float32))))
# batched (3-D) matmul as used in attention scores q @ k^T
q = rand_bf16(rng, (2, 4, 5, 64)); k = rand_bf16(rng, (2, 1, 9, 64))
y = to_np(mx_bf16(q) @ mx_bf16(k).swapaxes(-1, -2))
emu = bf16(gemm_seq(q, np.broadcast_to(np.swapaxes(k, -1, -2), (2, 4, 64, 9))))
report("batched bf16 q@k^T (broadcast kv head)", match(y, emu))
# dtype promotion: bf16 @ fp32 -> fp32 (sgemm)
x = rand_bf16(rng, (4, 256)); wf = rng.standard_normal((256, 8)).astype(np.float32)
y = mx_bf16(x) @ mx.array(wf)
print("bf16 @ fp32 ->", y.dtype)
yn = to_np(y)
report("bf16@fp32: vs seq fp32 sum (OpenBLAS order, expect <100%)", match(yn, gemm_seq(x, wf)))
report("bf16@fp32: vs float64-exact rounded once", match(yn, (x.astype(np.float64) @ wf.astype(np.float64)).astype(np.float32)))
x32 = rng.standard_normal((4, 4096)).astype(np.float32); w32 = rng.standard_normal((4096, 8)).astype(np.float32)
yn = to_np(mx.array(x32) @ mx.array(w32))
report("fp32@fp32 K=4096 (sgemm) vs seq fp32", match(yn, gemm_seq(x32, w32)))
report("fp32@fp32 K=4096 (sgemm) vs lanes8", match(yn, lanes8(x32, w32)))
