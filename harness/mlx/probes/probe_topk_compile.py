"""argpartition (router / indexer top-k) and mx.compile'd oMLX helpers (CPU JIT via g++ -O3, no -march,
jit_compiler.cpp:274) against the uncompiled ops and the numpy emulation."""
import numpy as np, mlx.core as mx
from _emu import *

rng = np.random.default_rng(6)
s = rng.standard_normal((64, 256)).astype(np.float32); k = 6
inds = np.array(mx.argpartition(mx.array(-s), kth=k - 1, axis=-1)[..., :k])
ok = np.mean([set(inds[i]) == set(np.argsort(-s[i], kind="stable")[:k]) for i in range(64)])
print(f"argpartition top-{k} set == exact top-k set (no ties): {100*ok:.1f}%  (order inside the k is NOT sorted)")
sb = bf16(np.round(s * 4) / 4)  # many ties
inds = np.array(mx.argpartition(mx.array(-sb), kth=k - 1, axis=-1)[..., :k])
ok = np.mean([set(inds[i]) == set(np.argsort(-sb[i], kind="stable")[:k]) for i in range(64)])
print(f"argpartition with ties: set == lowest-index-first top-k: {100*ok:.1f}%  (tie choice is std::nth_element's)")
# compiled overlap compressor (deepseek_v4_model.py _overlap_compress_kv core) vs emulation
def core(kv, gate, ape):
    gate = gate + ape.astype(gate.dtype)
    w = mx.softmax(gate, axis=-2, precise=True)
    return (kv * w).sum(axis=-2)
cc = mx.compile(core)
kv = rand_bf16(rng, (1, 6, 8, 128), 1); gate = rand_bf16(rng, (1, 6, 8, 128), 2); ape = rng.standard_normal((8, 128)).astype(np.float32)
y = to_np(cc(mx_bf16(kv), mx_bf16(gate), mx.array(ape)))
report("compiled overlap-compress core == uncompiled", match(y, to_np(core(mx_bf16(kv), mx_bf16(gate), mx.array(ape)))))
g = bf16(gate + bf16(ape))
x = np.moveaxis(g, -2, -1); m = x.max(-1, keepdims=True); e = cephes_exp((x - m).astype(np.float32))
w = np.moveaxis(bf16((e / seq_sum(e, -1)[..., None]).astype(np.float32)), -1, -2)
report("   == emulation: bf16 gate+ape, f32 softmax->bf16, bf16(kv*w), bf16 sequential sum", match(y, seq_sum(bf16(kv * w), -2, True)))
# hc pre-weighting as in hyper_connection._hc_ops: (pre[...,None]*y).sum(axis=2).astype(bf16), all f32
pre = rng.uniform(0, 1, (3, 5, 4)).astype(np.float32); yy = rng.standard_normal((3, 5, 4, 256)).astype(np.float32)
f = mx.compile(lambda p, v: (p[..., None] * v).sum(axis=2).astype(mx.bfloat16))
report("compiled hc collapse (f32 mul, f32 seq sum over 4, one bf16 round)", match(to_np(f(mx.array(pre), mx.array(yy))), bf16(seq_sum((pre[..., None] * yy).astype(np.float32), 2))))
