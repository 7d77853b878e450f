#!/usr/bin/env python3
"""Restores blocks this project wrote (harness/mlx/write-blocks.ts) into oMLX's own DeepSeek-V4 model
on MLX's CPU backend and continues from them, against the model's own uninterrupted run:

  native    the model prefills the prompt in block-sized chunks up to the last full boundary B, then
            the tail [B, T) in one call, then decodes greedily;
  restored  a fresh make_cache() whose every cache object gets its state from our blocks through its
            own `state` / `meta_state` setters (oMLX's RotatingKVCache and PoolingCache), then the
            same tail and decode.

Reading the block files is ours (oMLX's paged_ssd_cache / prefix_cache are not among the gathered
files): safetensors with oMLX's names (`layer_{i}[_sub_{j}]_state_{k}`, `_none` flags, class names),
PoolingCacheDelta rows joined oldest first as oMLX's delta chain does, buffers, previous window and
window rows from the last block. The first window row of a block is the slot no query reads (we
write zeros there); the run shows the continuation does not depend on it.

    python3 harness/mlx/omlx_restore.py --ckpt DIR --blocks DIR --dtype float32 --decode 12 --out FILE.json
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".omlx", "site"), os.path.join(HERE, ".work", "python")]

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import omlx_install  # noqa: E402,F401  (ours: installs oMLX's model into mlx_lm, as its patch does)
from omlx_reference import checkpoint_digest, load  # noqa: E402


def element(tensors, meta, prefix, k):
    if meta.get(f"{prefix}_state_{k}_none") == "1":
        return None
    zero = meta.get(f"{prefix}_state_{k}_zero_dim")
    if zero is not None:
        return mx.zeros(tuple(int(d) for d in zero.split(",")), dtype=mx.float32)
    return tensors[f"{prefix}_state_{k}"]


def sub_state(tensors, meta, prefix):
    n = int(meta[f"{prefix}_state_count"])
    return meta.get(f"{prefix}_state_class_name"), [element(tensors, meta, prefix, k) for k in range(n)]


def restore(model, blocks):
    """Our blocks (oldest first) -> the model's own cache objects."""
    cache = model.make_cache()
    last_t, last_m = blocks[-1]
    metas = json.loads(last_m["layer_meta_states"])
    for i, c in enumerate(cache):
        subs = list(c.caches) if hasattr(c, "caches") else [c]
        prefixes = [f"layer_{i}_sub_{j}" for j in range(len(subs))] if hasattr(c, "caches") else [f"layer_{i}"]
        rot_meta = metas[i][1][0] if hasattr(c, "caches") else metas[i]
        cls, (keys, values) = sub_state(last_t, last_m, prefixes[0])
        subs[0].state = (keys, values)
        subs[0].meta_state = tuple(rot_meta)
        for j, (pool, prefix) in enumerate(zip(subs[1:], prefixes[1:]), start=1):
            rows = []
            for t, m in blocks:
                k, st = sub_state(t, m, prefix)
                if k == "PoolingCacheDelta":
                    start, end = (int(x) for x in np.array(st[5]).tolist())
                    if st[2] is not None and end > start:
                        rows.append(st[2])
                elif k == "PoolingCache":
                    rows = [st[2]] if st[2] is not None else []
            k, st = sub_state(last_t, last_m, prefix)
            pooled = mx.concatenate(rows, axis=1) if rows else None
            pool.state = (st[0], st[1], pooled, st[3], st[4])
            pool.meta_state = metas[i][1][j]
    return cache


def run(model, cache, tail, decode):
    logits = model(mx.array([tail]), cache=cache)
    mx.eval(logits)
    out = [np.array(logits[0, -1].astype(mx.float32))]
    tokens = []
    for _ in range(decode):
        nxt = int(mx.argmax(logits[0, -1]).item())
        tokens.append(nxt)
        logits = model(mx.array([[nxt]]), cache=cache)
        mx.eval(logits)
        out.append(np.array(logits[0, -1].astype(mx.float32)))
    return tokens, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--blocks", required=True, help="the directory harness/mlx/write-blocks.ts wrote")
    ap.add_argument("--dtype", choices=["float32"], default="float32")
    ap.add_argument("--decode", type=int, default=12)
    ap.add_argument("--zero-first-row", choices=["as-written", "random"], default="as-written",
                    help="`random` overwrites the window's first row with noise: the continuation must not change")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    mx.set_default_device(mx.cpu)
    index = json.load(open(os.path.join(a.blocks, "index.json")))
    ids, bs = index["tokens"], index["block_size"]
    model, _ = load(a.ckpt, a.dtype, False)
    blocks = [mx.load(os.path.join(a.blocks, p), return_metadata=True) for p in index["blocks"]]
    # The decoder leaves the block holding the prompt's last token unread (it must prefill one token):
    # restore the chain up to the last boundary before the final token.
    usable = (len(ids) - 1) // bs
    blocks = blocks[:usable]
    B = usable * bs
    if a.zero_first_row == "random":
        rng = np.random.default_rng(7)
        t, m = blocks[-1]
        for name in list(t):
            if name.endswith("_state_0") and ("_sub_0_" in name or name.count("_") == 3):
                arr = np.array(t[name].astype(mx.float32))
                if arr.ndim == 4 and arr.shape[2] == model.args.sliding_window:
                    arr[:, :, 0, :] = rng.standard_normal(arr.shape[-1]) * 10
                    t[name] = mx.array(arr).astype(t[name].dtype)

    native_cache = model.make_cache()
    for at in range(0, B, bs):
        mx.eval(model(mx.array([ids[at:at + bs]]), cache=native_cache))
    n_tokens, n_logits = run(model, native_cache, ids[B:], a.decode)
    r_tokens, r_logits = run(model, restore(model, blocks), ids[B:], a.decode)
    rel = [float(np.linalg.norm(x - y) / np.linalg.norm(y)) for x, y in zip(r_logits, n_logits)]
    identical = [bool(np.array_equal(x.view(np.uint32), y.view(np.uint32))) for x, y in zip(r_logits, n_logits)]
    result = {
        "producer": "harness/mlx/omlx_restore.py", "checkpoint_sha256": checkpoint_digest(a.ckpt),
        "blocks_profile": index["profile"], "dtype": a.dtype, "block_size": bs, "tokens": len(ids),
        "restored_blocks": usable, "restored_tokens": B, "first_window_row": a.zero_first_row,
        "native_greedy": n_tokens, "restored_greedy": r_tokens, "greedy_equal": n_tokens == r_tokens,
        "logits_rel_error_max": max(rel), "logits_steps_bit_identical": sum(identical), "logits_steps": len(identical),
        "restored_logits_sha256": __import__("hashlib").sha256(b"".join(x.tobytes() for x in r_logits)).hexdigest(),
        "mlx_version": mx.__version__,
    }
    json.dump(result, open(a.out, "w"), indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
