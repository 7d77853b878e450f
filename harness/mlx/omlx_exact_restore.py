#!/usr/bin/env python3
"""Step 3 of the exact-restore proof (harness/mlx/make-exact-restore-proof.sh): our block, whose
cache arrays the bridge computed with the mlx-cpu arithmetic (harness/mlx/exact-blocks.ts), restored
into a fresh make_cache() of oMLX's own DeepSeek-V4 model (bf16 + quantized, MLX CPU) through the
cache objects' own setters (omlx_restore.restore), then the tail in one call and greedy decode steps;
against the native continuation of step 1 (harness/mlx/omlx_exact_native.py), bit for bit.

The same model object also re-runs the native leg in this process (one-shot prefill of B, the same
tail and decode), so the comparison holds within one process too. Before continuing, every restored
cache array is compared element by element with the cache MLX left after its own one-shot prefill
(which layer, which part, how many elements differ); the window's first row (the slot no query
reads, zeros in our blocks) is reported separately.

    python3 harness/mlx/omlx_exact_restore.py --ckpt DIR --blocks DIR --native native.safetensors --out FILE.json
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".omlx", "site"), os.path.join(HERE, ".work", "python")]
os.environ.setdefault("OMLX_DSV4_WSDPA", "0")

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from omlx_reference import POOL_PARTS, checkpoint_digest, load, temporal_rows  # noqa: E402
from omlx_restore import restore, run  # noqa: E402


def bits(a):
    """An MLX array's exact bit pattern as numpy (bf16 -> uint16 codes, f32 -> uint32)."""
    if a.dtype == mx.bfloat16:
        return np.array(a.view(mx.uint16))
    if a.dtype == mx.float32:
        return np.array(a.view(mx.uint32))
    return np.array(a)


def compare_arrays(name, ours, ref):
    """Element-by-element: dtype, shape, how many codes differ, max |diff|."""
    rec = {"name": name}
    if ours is None or ref is None:
        rec.update(ours_none=ours is None, native_none=ref is None, equal=(ours is None) == (ref is None))
        return rec
    rec.update(ours_dtype=str(ours.dtype), native_dtype=str(ref.dtype), ours_shape=list(ours.shape), native_shape=list(ref.shape))
    if ours.shape != ref.shape:
        rec["equal"] = False
        return rec
    a, b = np.array(ours.astype(mx.float32)), np.array(ref.astype(mx.float32))
    same_dtype = ours.dtype == ref.dtype
    diff = (bits(ours) != bits(ref)) if same_dtype else (a.view(np.uint32) != b.view(np.uint32))
    rec.update(elements=int(a.size), elements_differing=int(diff.sum()),
               max_abs_diff=float(np.max(np.abs(a - b))) if a.size else 0.0,
               equal=bool(same_dtype and not diff.any()))
    if diff.any():
        rec["first_differing_index"] = [int(x) for x in np.argwhere(diff)[0]]
    return rec


def compare_caches(restored, native_file, native_meta, window):
    """Every restored cache array against the native one-shot cache of step 1."""
    out = []
    for i, c in enumerate(restored):
        subs = list(c.caches) if hasattr(c, "caches") else [c]
        rot, pools = subs[0], subs[1:]
        ours_rows = temporal_rows(rot)  # [rows, dim]
        ref_all = native_file[f"oneshot.layers.{i}.window_all"]
        n = ours_rows.shape[0]
        # The rows a query can read: the last window-1.
        out.append(compare_arrays(f"layer {i} window rows [-{window - 1}:]", ours_rows[n - (window - 1):], ref_all[ref_all.shape[0] - (window - 1):]))
        if n >= window:
            r = compare_arrays(f"layer {i} window first row (unread slot)", ours_rows[n - window:n - window + 1], ref_all[ref_all.shape[0] - window:ref_all.shape[0] - window + 1])
            r["expected_to_differ"] = True
            out.append(r)
        # meta_state is (keep, max_size, offset, _idx); _idx is the row count each side holds (MLX keeps
        # every row of a one-shot prefill, our blocks `window`), so it is checked against that count.
        ours_m, ref_m = [int(x) for x in rot.meta_state], [int(x) for x in json.loads(native_meta[f"oneshot.layers.{i}.window.meta_state"])]
        out.append({"name": f"layer {i} window meta_state (keep, max_size, offset, _idx)", "ours": ours_m, "native": ref_m,
                    "native_rows": int(ref_all.shape[0]), "ours_rows": int(n),
                    "equal": ours_m[:3] == ref_m[:3] and ours_m[3] == n and ref_m[3] == ref_all.shape[0]})
        for j, pool in enumerate(pools):
            base = f"oneshot.layers.{i}.pool{j}"
            for part, e in zip(POOL_PARTS, pool.state):
                key = f"{base}.{part}"
                ref = native_file.get(key)
                if ref is None and native_meta.get(key + ".zero_dim") is not None:
                    ref = mx.zeros(tuple(int(d) for d in native_meta[key + ".zero_dim"].split(",")))
                ours = None if e is None else e.reshape(-1, e.shape[-1]) if e.size else e
                if ours is not None and ours.size == 0 and ref is not None and ref.size == 0:
                    out.append({"name": f"layer {i} pool{j} {part}", "empty_both": True, "equal": True})
                    continue
                out.append(compare_arrays(f"layer {i} pool{j} {part}", ours, ref))
            ours_meta, ref_meta = pool.meta_state, json.loads(native_meta[f"{base}.meta_state"])
            out.append({"name": f"layer {i} pool{j} meta_state", "ours": ours_meta, "native": ref_meta,
                        "equal": json.dumps(ours_meta) == json.dumps(ref_meta)})
    return out


def logit_stats(ours, ref):
    identical = [bool(np.array_equal(x.view(np.uint32), y.view(np.uint32))) for x, y in zip(ours, ref)]
    maxdiff = max(float(np.max(np.abs(x - y))) for x, y in zip(ours, ref))
    return identical, maxdiff


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--blocks", required=True, help="the directory harness/mlx/exact-blocks.ts wrote")
    ap.add_argument("--native", required=True, help="harness/mlx/omlx_exact_native.py's output")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    mx.set_default_device(mx.cpu)
    index = json.load(open(os.path.join(a.blocks, "index.json")))
    ids, bs = index["tokens"], index["block_size"]
    native_file, native_meta = mx.load(a.native, return_metadata=True)
    digest = checkpoint_digest(a.ckpt)
    if native_meta["checkpoint_sha256"] != digest:
        raise SystemExit("omlx_exact_restore: the native run used another checkpoint")
    if [int(x) for x in np.array(native_file["input_ids"]).tolist()] != ids:
        raise SystemExit("omlx_exact_restore: the native run's prompt is not the blocks' prompt")
    decode = int(native_meta["decode"])
    model, _ = load(a.ckpt, "bfloat16", True)
    blocks = [mx.load(os.path.join(a.blocks, p), return_metadata=True) for p in index["blocks"]]
    usable = (len(ids) - 1) // bs
    blocks = blocks[:usable]
    B = usable * bs
    if B != int(native_meta["block_size"]):
        raise SystemExit(f"omlx_exact_restore: the blocks restore {B} tokens, the native one-shot prefilled {native_meta['block_size']}")

    restored = restore(model, blocks)
    cache_cmp = compare_caches(restored, native_file, native_meta, model.args.sliding_window)
    r_tokens, r_logits = run(model, restored, ids[B:], decode)

    # Step 1's native continuation (another process, same code path).
    n_logits = [np.array(native_file[f"native.step.{s}.logits"].astype(mx.float32)) for s in range(decode + 1)]
    n_tokens = json.loads(native_meta["greedy"])
    # The same model object, natively: one-shot prefill of B, then the same continuation.
    cache = model.make_cache()
    mx.eval(model(mx.array([ids[:B]]), cache=cache))
    s_tokens, s_logits = run(model, cache, ids[B:], decode)

    identical, maxdiff = logit_stats(r_logits, n_logits)
    identical_same, maxdiff_same = logit_stats(r_logits, s_logits)
    native_repeat, _ = logit_stats(s_logits, n_logits)
    differing = [c["name"] for c in cache_cmp if not c.get("equal") and not c.get("expected_to_differ")]
    result = {
        "claim": "blocks computed by the bridge with the mlx-cpu cache arithmetic restore into oMLX's DeepSeek-V4 model (MLX CPU) bit for bit",
        "producers": ["harness/mlx/omlx_exact_native.py", "harness/mlx/exact-blocks.ts", "harness/mlx/omlx_exact_restore.py",
                      "harness/mlx/make-exact-restore-proof.sh"],
        "mlx_version": mx.__version__, "device": "cpu", "checkpoint": "pd-bridge make-checkpoint --preset tiny --seed 1",
        "checkpoint_sha256": digest, "dtype": "bfloat16", "quantized": True,
        "quantization": {k: len(v) for k, v in getattr(model, "quantization_modes", {}).items()},
        "blocks_profile": index["profile"], "blocks_storage": index.get("storage"), "block_size": bs, "tokens": len(ids),
        "restored_blocks": usable, "restored_tokens": B, "tail_tokens": len(ids) - B, "decode_steps": decode,
        "logits_steps": len(identical), "logits_steps_bit_identical": sum(identical),
        "logits_max_abs_diff": maxdiff,
        "native_greedy": n_tokens, "restored_greedy": r_tokens, "greedy_equal": n_tokens == r_tokens,
        "same_process_native": {
            "logits_steps_bit_identical": sum(identical_same), "logits_max_abs_diff": maxdiff_same,
            "greedy": s_tokens, "greedy_equal": s_tokens == r_tokens,
            "native_repeat_bit_identical_to_step1": sum(native_repeat),
        },
        "cache_arrays_compared": len([c for c in cache_cmp if "elements" in c]),
        "cache_arrays_differing": differing,
        "cache_comparison": cache_cmp,
    }
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    short = {k: result[k] for k in ("logits_steps_bit_identical", "logits_steps", "greedy_equal", "logits_max_abs_diff", "cache_arrays_differing")}
    short["same_process"] = result["same_process_native"]
    print(json.dumps(short))


if __name__ == "__main__":
    main()
