"""Elementwise ops, dtype promotion, astype, unary transcendental functions on the CPU.
bf16 binary ops: mlx/types/bf16.h bfloat_binop -> float op, rounded to bf16 (RNE) per op.
exp: simd::exp (simd/math.h, Cephes 2^x polynomial with std::fma), NOT libm expf.
sigmoid: unary_ops.h Sigmoid: e = exp(|x|) (rounded to T), y = 1/(1+e) in f32, x<0 ? y : 1-y, then T.
sqrt: std::sqrt in T's float; rsqrt: base_simd.h 1/sqrt (two roundings); log1p/log: libm (glibc)."""
import numpy as np, mlx.core as mx, mlx.nn as nn
from _emu import *

rng = np.random.default_rng(2)
n = 100000
a = rand_bf16(rng, n, 3); b = rand_bf16(rng, n, 3); c32 = rng.standard_normal(n).astype(np.float32)
A, B, C = mx_bf16(a), mx_bf16(b), mx.array(c32)
print("dtypes: bf16*bf16", (A*B).dtype, "| bf16*py-float", (A*0.1).dtype, "| bf16*mx.array(0.1,f32)", (A*mx.array(0.1)).dtype,
      "| bf16+f32[n]", (A+C).dtype, "| bf16*mx.array(0.1,f32)[()]", (A*mx.array([0.1])).dtype)
report("bf16*bf16 = bf16(f32(a)*f32(b))", match(to_np(A*B), bf16(a*b)))
report("bf16+bf16 = bf16(a+b)", match(to_np(A+B), bf16(a+b)))
report("bf16/bf16 = bf16(a/b)", match(to_np(A/B), bf16(a/b)))
report("bf16*0.1 (python scalar -> bf16 constant bf16(0.1))", match(to_np(A*0.1), bf16(a*bf16(np.float32(0.1)))))
report("bf16+f32 array -> f32(a+c), no bf16 rounding", match(to_np(A+C), (a+c32).astype(np.float32)))
report("astype(bf16) of f32 = RNE upper 16 bits", match(to_np(C.astype(mx.bfloat16)), bf16(c32)))
x32 = (rng.standard_normal(n) * 10).astype(np.float32); X32 = mx.array(x32)
report("exp f32 = cephes_exp (simd/math.h:27)", match(to_np(mx.exp(X32)), cephes_exp(x32)))
cr = np.exp(x32.astype(np.float64)).astype(np.float32)
report("  exp f32 vs correctly-rounded exp (for reference)", match(to_np(mx.exp(X32)), cr))
report("exp bf16 = bf16(cephes_exp(x))", match(to_np(mx.exp(A)), bf16(cephes_exp(a))))
def sig_emu(x, isbf):
    e = cephes_exp(np.abs(x)); e = bf16(e) if isbf else e
    y = (np.float32(1) / (np.float32(1) + e)).astype(np.float32)
    r = np.where(x < 0, y, (np.float32(1) - y).astype(np.float32)).astype(np.float32)
    return bf16(r) if isbf else r
report("sigmoid f32 = 1/(1+exp|x|) / 1-that", match(to_np(mx.sigmoid(X32)), sig_emu(x32, False)))
report("sigmoid bf16 (exp rounded to bf16 first)", match(to_np(mx.sigmoid(A)), sig_emu(a, True)))
report("silu bf16 = bf16(x * sigmoid_bf16(x))", match(to_np(nn.silu(A)), bf16(a * sig_emu(a, True))))
silu_c = mx.compile(nn.silu)
report("silu bf16 under mx.compile == uncompiled", match(to_np(silu_c(A)), to_np(nn.silu(A))))
p32 = np.abs(x32) + np.float32(1e-3); P = mx.array(p32)
report("sqrt f32 = correctly rounded", match(to_np(mx.sqrt(P)), np.sqrt(p32)))
report("rsqrt f32 = f32(1/f32(sqrt(x)))", match(to_np(mx.rsqrt(P)), (np.float32(1) / np.sqrt(p32)).astype(np.float32)))
report("  rsqrt f32 vs correctly rounded 1/sqrt", match(to_np(mx.rsqrt(P)), (1 / np.sqrt(p32.astype(np.float64))).astype(np.float32)))
z = np.zeros_like(x32)
report("softplus f32 = logaddexp(x,0) = max + log1p(cephes_exp(min-max))", match(to_np(nn.softplus(X32)), logaddexp_emu(x32, z)))
report("sqrt(softplus) f32 (router 'sqrtsoftplus')", match(to_np(mx.sqrt(nn.softplus(X32))), np.sqrt(logaddexp_emu(x32, z))))
y32 = (rng.standard_normal(n) * 10).astype(np.float32)
report("logaddexp f32", match(to_np(mx.logaddexp(X32, mx.array(y32))), logaddexp_emu(x32, y32)))
report("log f32 = glibc logf", match(to_np(mx.log(P)), libm("logf", p32)))
report("log f32 vs correctly rounded log", match(to_np(mx.log(P)), np.log(p32.astype(np.float64)).astype(np.float32)))
# compiled swiglu as in oMLX _limited_swiglu (mx.compile) vs emulation
def swiglu(g, u, limit=10.0):
    g = mx.minimum(g, limit); u = mx.clip(u, -limit, limit); return nn.silu(g) * u
sw = mx.compile(swiglu)
g_ = np.minimum(a, np.float32(10)); u_ = np.clip(b, -10, 10)
report("compiled _limited_swiglu bf16 = bf16(bf16(g*sig(g))*u)", match(to_np(sw(A, B)), bf16(bf16(g_ * sig_emu(g_, True)) * u_)))
