#!/usr/bin/env python3
"""Step 1 of the exact-restore proof (harness/mlx/make-exact-restore-proof.sh): oMLX's own DeepSeek-V4
model on MLX's CPU backend, bf16 + quantized exactly as omlx_reference.py's mxq case, over a prompt of
B + tail tokens:

  - a ONE-SHOT prefill of the first B tokens, recording every layer's attention input (the
    post-attn_norm activations, as omlx_reference.py does) and the cache MLX left there (the
    `oneshot` layout of omlx_reference.py's Dump, for element-by-element localisation);
  - the cache path's weights as MLX holds them (omlx_reference.py's --save-cache-weights set);
  - the native continuation from that same cache: the tail [B, T) in one call, then greedy decode
    steps; every step's last-position logits (native dtype) and the greedy tokens.

    python3 harness/mlx/omlx_exact_native.py --ckpt DIR --tokens tokens-301.json --block-size 256 \
        --decode 12 --out native.safetensors --weights-out cache-weights.safetensors
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".omlx", "site"), os.path.join(HERE, ".work", "python")]
os.environ.setdefault("OMLX_DSV4_WSDPA", "0")

import mlx.core as mx  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402

import omlx_install  # noqa: E402,F401
from omlx_reference import Dump, attn_input_recorder, checkpoint_digest, load  # noqa: E402

CASE = "exact-restore-mxq"


def save_cache_weights(model, path, ckpt):
    """omlx_reference.py's --save-cache-weights, verbatim in what it keeps and how it labels it."""
    keep = (".attn.wkv.", ".attn.kv_norm.", ".attn.compressor.", ".attn.indexer.compressor.")
    params = {k: v for k, v in tree_flatten(model.parameters()) if any(t in k for t in keep)}
    mx.save_safetensors(path, params, metadata={
        "producer": "harness/mlx/omlx_exact_native.py", "case": CASE, "checkpoint_sha256": checkpoint_digest(ckpt),
        "quantization": json.dumps({k: sorted(v) for k, v in getattr(model, "quantization_modes", {}).items()})})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--block-size", type=int, default=256)
    ap.add_argument("--decode", type=int, default=12)
    ap.add_argument("--out", required=True)
    ap.add_argument("--weights-out", required=True)
    a = ap.parse_args()
    mx.set_default_device(mx.cpu)
    t0 = time.time()
    model, _ = load(a.ckpt, "bfloat16", True)
    tok = json.load(open(a.tokens))
    ids = tok["ids"] if isinstance(tok, dict) else tok
    B = a.block_size
    if len(ids) <= B:
        raise SystemExit(f"omlx_exact_native: {len(ids)} tokens leave no tail after B = {B}")
    store = {}
    attn_input_recorder(model, store)
    d = Dump(model.args.sliding_window)
    d.put("input_ids", mx.array(ids, dtype=mx.int32))

    # One-shot prefill of the first block.
    cache = model.make_cache()
    store["on"] = True
    logits = model(mx.array([ids[:B]]), cache=cache)
    mx.eval(logits)
    store["on"] = False
    for i in range(len(model.layers)):
        xs = store[i]
        if len(xs) != 1:
            raise SystemExit(f"layer {i}: {len(xs)} attention calls in a one-shot prefill")
        d.put(f"oneshot.layers.{i}.attn_input", xs[0][0])
    d.put("oneshot.logits_last", logits[0, -1])
    d.cache("oneshot", cache)
    # The full window buffer MLX holds (all its rows, temporal order), for row-by-row comparison.
    from omlx_reference import temporal_rows
    for i, c in enumerate(cache):
        rot = c.caches[0] if hasattr(c, "caches") else c
        d.put(f"oneshot.layers.{i}.window_all", temporal_rows(rot))

    save_cache_weights(model, a.weights_out, a.ckpt)

    # Native continuation from the same cache: the tail in one call, then greedy decode.
    logits = model(mx.array([ids[B:]]), cache=cache)
    mx.eval(logits)
    d.put("native.step.0.logits", logits[0, -1])
    greedy = []
    for step in range(1, a.decode + 1):
        nxt = int(mx.argmax(logits[0, -1]).item())
        greedy.append(nxt)
        logits = model(mx.array([[nxt]]), cache=cache)
        mx.eval(logits)
        d.put(f"native.step.{step}.logits", logits[0, -1])

    meta = {
        "producer": "harness/mlx/omlx_exact_native.py", "case": CASE,
        "tokens": str(len(ids)), "block_size": str(B), "tail": str(len(ids) - B), "decode": str(a.decode),
        "dtype": "bfloat16", "quantized": "1", "greedy": json.dumps(greedy),
        "mlx_version": mx.__version__, "checkpoint_sha256": checkpoint_digest(a.ckpt),
        "logits_dtype": str(logits.dtype),
    }
    meta.update(d.meta)
    mx.save_safetensors(a.out, d.tensors, metadata=meta)
    print(json.dumps({"case": CASE, "B": B, "tail": len(ids) - B, "greedy": greedy,
                      "logits_dtype": str(logits.dtype), "seconds": round(time.time() - t0, 1)}))


if __name__ == "__main__":
    main()
