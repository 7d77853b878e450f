"""Discriminating version of probe_matmul: wide-exponent inputs so that the summation order shows
through the final bf16 rounding. Also characterises OpenBLAS sgemm (fp32 path)."""
import numpy as np, mlx.core as mx
from _emu import *

rng = np.random.default_rng(1)
def wide(shape):
    return bf16((rng.standard_normal(shape) * 2.0 ** rng.integers(-12, 12, shape)).astype(np.float32))
M, K, N = 4, 1000, 256
x = wide((M, K)); w = wide((N, K))
y = to_np(mx_bf16(x) @ mx_bf16(w).T)
report("bf16 gemm wide-exponent: bf16(seq fp32)", match(y, bf16(gemm_seq(x, w.T))))
report("bf16 gemm wide-exponent: bf16(lanes8)   [our profile order]", match(y, bf16(lanes8(x, w.T))))
report("bf16 gemm wide-exponent: bf16(exact)", match(y, bf16((x.astype(np.float64) @ w.T.astype(np.float64)).astype(np.float32))))
# M=1 (decode) uses the same kernel
y1 = to_np(mx_bf16(x[:1]) @ mx_bf16(w).T)
report("bf16 gemm M=1 wide-exponent: bf16(seq fp32)", match(y1, bf16(gemm_seq(x[:1], w.T))))
# fp32 sgemm: sequential fma chain?
def fma_chain(a, b):
    acc = np.zeros((a.shape[0], b.shape[1]), np.float64).astype(np.float32)
    for k in range(a.shape[1]):
        acc = (a[:, k:k+1].astype(np.float64) * b[k:k+1, :] + acc).astype(np.float32)
    return acc
xs = rng.standard_normal((4, 64)).astype(np.float32); ws = rng.standard_normal((64, 64)).astype(np.float32)
ys = to_np(mx.array(xs) @ mx.array(ws))
report("fp32 sgemm K=64 vs seq (mul then add)", match(ys, gemm_seq(xs, ws)))
report("fp32 sgemm K=64 vs seq fma chain", match(ys, fma_chain(xs, ws)))
report("fp32 sgemm K=64 vs exact rounded once", match(ys, (xs.astype(np.float64) @ ws).astype(np.float32)))
import subprocess
print(subprocess.run("grep -m1 -o 'avx512f\\|avx2' /proc/cpuinfo | head -1; ls -l /usr/lib/x86_64-linux-gnu/libopenblas.so* | head -3", shell=True, capture_output=True, text=True).stdout)

# Tie-breaking construction: row = [B, tie, tiny...] where B + tie is a bf16 midpoint and the
# tinies decide the rounding only if the order keeps them.  w = 1, so products are the x values.
print("-- tie construction (order-sensitive) --")
T, K = 400, 128
X = np.zeros((T, K), np.float32)
for t in range(T):
    B = bf16(np.float32(rng.uniform(1, 2) * 2.0 ** rng.integers(-3, 3)))
    e = np.floor(np.log2(B))
    X[t, :] = 0
    perm = rng.permutation(K)
    X[t, perm[0]] = B
    X[t, perm[1]] = np.float32(2.0 ** (e - 8))        # half a bf16 ulp of B -> exact tie
    tiny = np.float32(2.0 ** (e - rng.integers(25, 28)))  # below half an fp32 ulp of B
    for j in perm[2:2 + rng.integers(8, 100)]:
        X[t, j] = tiny * rng.choice([1, -1, 1, 1])
X = bf16(X)
W = np.ones((K, 1), np.float32)
y = to_np(mx_bf16(X) @ mx_bf16(W))[:, 0]
report("tie rows: bf16(seq fp32)  [MLX claim]", match(y, bf16(gemm_seq(X, W))[:, 0]))
report("tie rows: bf16(lanes8)    [our profiles]", match(y, bf16(lanes8(X, W))[:, 0]))
report("tie rows: bf16(exact)     [round once after exact]", match(y, bf16((X.astype(np.float64) @ W).astype(np.float32))[:, 0]))
