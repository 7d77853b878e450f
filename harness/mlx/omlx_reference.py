#!/usr/bin/env python3
"""Runs oMLX's own DeepSeek-V4 model (mlx_lm.models.deepseek_v4 as oMLX installs it) on MLX's CPU
backend over one of our checkpoints and dumps, in MLX's own dtypes and layouts:
  - every layer's cache state (the model's own cache objects: RotatingKVCache keys and meta state,
    each PoolingCache's five-part state) at every block boundary of a chunked prefill, after a
    one-shot prefill, and after decode steps;
  - the attention inputs of the one-shot prefill, the last-position logits of every call, and the
    greedy tokens.

    python3 harness/mlx/omlx_reference.py --ckpt DIR --tokens tokens.json --dtype float32 \
        --block-size 256 --decode 12 --case tiny-t777 --out FILE.safetensors

Needs harness/mlx/.work/python (MLX) and harness/mlx/.omlx/site (harness/mlx/gather.sh) on the
path; it puts them there itself. Weights: `float32` casts every floating tensor to float32;
`bfloat16` casts as mlx_lm.convert does (every floating tensor but the model's cast_predicate
exclusions); `stored` keeps the checkpoint's dtypes. `--quantize` applies the model's own
make_quantization_config through mlx's nn.quantize (mxfp8 attention, mxfp4 experts), as
mlx_lm.convert does.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".omlx", "site"), os.path.join(HERE, ".work", "python")]
# Metal-only paths in oMLX's model fall back on the CPU; ask for the MLX-op paths up front.
os.environ.setdefault("OMLX_DSV4_WSDPA", "0")

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
from mlx.utils import tree_flatten, tree_map  # noqa: E402

import omlx_install  # noqa: E402,F401  (ours: installs oMLX's model into mlx_lm, as its patch does)


def hub_names(weights):
    """Our checkpoint's names (transformers' save_pretrained) -> DeepSeek's hub names, which the
    model's own sanitize() expects (it adds the `model.` prefix and its module names itself)."""
    out = {}
    for k, v in weights.items():
        nk = k
        if nk.startswith("model.layers."):
            nk = nk[len("model."):]
        # transformers 5.17 saves the attention's kv norm as `attn.norm`; DeepSeek's hub checkpoints
        # (and oMLX's module, which sanitize() does not rename) call it `attn.kv_norm`.
        if nk.endswith(".attn.norm.weight"):
            nk = nk[: -len("norm.weight")] + "kv_norm.weight"
        nk = {
            "model.embed_tokens.weight": "embed.weight",
            "model.norm.weight": "norm.weight",
            "model.hc_head.hc_fn": "hc_head_fn",
            "model.hc_head.hc_base": "hc_head_base",
            "model.hc_head.hc_scale": "hc_head_scale",
        }.get(nk, nk)
        out[nk] = v
    return out


def model_args(config):
    """transformers' config.json -> the hub-style fields oMLX's ModelArgs reads."""
    ratio = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    args = {k: v for k, v in config.items() if k not in ("layer_types", "mlp_layer_types", "rope_parameters", "compress_rates")}
    args["compress_ratios"] = [ratio[t] for t in config["layer_types"]]
    args["num_hash_layers"] = sum(1 for t in config["mlp_layer_types"] if t == "hash_moe")
    rp = config.get("rope_parameters", {})
    main, compress = rp.get("main", {}), rp.get("compress", {})
    if main.get("rope_type", "default") != "default":
        raise SystemExit("omlx_reference: oMLX's model applies YaRN only to the compressed layers' rope")
    args["rope_theta"] = main.get("rope_theta", config.get("rope_theta"))
    args["compress_rope_theta"] = compress.get("rope_theta", config.get("compress_rope_theta"))
    if compress.get("rope_type") == "yarn":
        args["rope_scaling"] = {
            "type": "yarn", "factor": compress["factor"],
            "original_max_position_embeddings": compress["original_max_position_embeddings"],
            "beta_fast": compress.get("beta_fast", 32), "beta_slow": compress.get("beta_slow", 1),
        }
    else:
        args["rope_scaling"] = None
    args["qk_rope_head_dim"] = int(round(config["head_dim"] * config.get("partial_rotary_factor", 1.0)))
    return args


def load(ckpt, dtype, quantize):
    from mlx_lm.models import deepseek_v4 as dsv4
    config = json.load(open(os.path.join(ckpt, "config.json")))
    args = dsv4.ModelArgs.from_dict(model_args(config))
    model = dsv4.Model(args)
    weights = {}
    for f in sorted(os.listdir(ckpt)):
        if f.endswith(".safetensors"):
            weights.update(mx.load(os.path.join(ckpt, f)))
    weights = model.sanitize(hub_names(weights))
    if dtype == "float32":
        weights = {k: v.astype(mx.float32) if mx.issubdtype(v.dtype, mx.floating) else v for k, v in weights.items()}
    elif dtype == "bfloat16":
        # mlx_lm.convert's cast. Unquantized routed experts cannot run in bfloat16 on MLX's CPU
        # (GatherMM: "Currently only supports float32"), and keeping them float32 promotes the
        # whole residual stream to float32 after layer 0: a bfloat16 reference needs --quantize.
        if not quantize:
            raise SystemExit("omlx_reference: --dtype bfloat16 needs --quantize on MLX's CPU (GatherMM is float32-only)")
        keep = model.cast_predicate
        weights = {k: v.astype(mx.bfloat16) if mx.issubdtype(v.dtype, mx.floating) and keep(k) else v for k, v in weights.items()}
    model.load_weights(list(weights.items()), strict=True)
    if quantize:
        # What mlx_lm.convert does with the model's own per-module quantization table.
        qcfg = dsv4.make_quantization_config(model)

        def predicate(path, module):
            if not hasattr(module, "to_quantized"):
                return False
            return qcfg[path] if path in qcfg else {k: qcfg[k] for k in ("group_size", "bits", "mode")}
        nn.quantize(model, class_predicate=predicate)
        modes = {}
        for path, m in tree_flatten(model.leaf_modules(), is_leaf=nn.Module.is_module):
            if hasattr(m, "mode") and hasattr(m, "bits"):
                key = f"{m.mode}{m.bits}/g{m.group_size}"
                modes.setdefault(key, []).append(path)
        model.quantization_modes = modes
    mx.eval(model.parameters())
    return model, config


POOL_PARTS = ("buf_kv", "buf_gate", "pooled", "prev_win_kv", "prev_win_gate")


def temporal_rows(cache):
    """A RotatingKVCache's keys in temporal order, [rows, dim] (batch 1, one kv head)."""
    keys = cache.state[0]
    rows = keys.shape[2]
    idx = cache._idx
    if idx < rows and cache.offset > rows:
        keys = mx.concatenate([keys[..., idx:, :], keys[..., :idx, :]], axis=2)
    return keys[0, 0]


class Dump:
    """Tensors and string metadata of one reference file. Layouts are MLX's, squeezed of the batch
    (and kv-head) axes; the window keeps its last `window` rows (MLX may hold more: the row count
    and meta state are recorded)."""

    def __init__(self, window):
        self.window = window
        self.tensors = {}
        self.meta = {}

    def put(self, name, a):
        self.tensors[name] = mx.contiguous(a)

    def cache(self, prefix, cache):
        for i, c in enumerate(cache):
            base = f"{prefix}.layers.{i}"
            subs = list(c.caches) if hasattr(c, "caches") else [c]
            rot, pools = subs[0], subs[1:]
            rows = temporal_rows(rot)
            self.put(f"{base}.window", rows[-self.window:])
            self.meta[f"{base}.window.meta_state"] = json.dumps(list(rot.meta_state))
            self.meta[f"{base}.window.rows"] = str(rows.shape[0])
            for j, pool in enumerate(pools):
                state = pool.state
                if len(state) != len(POOL_PARTS):
                    raise SystemExit(f"{base} pool {j}: a PoolingCache state of {len(state)} parts, expected 5")
                for part, e in zip(POOL_PARTS, state):
                    key = f"{base}.pool{j}.{part}"
                    if e is None:
                        self.meta[key + ".none"] = "1"
                    elif e.size == 0:
                        self.meta[key + ".zero_dim"] = ",".join(map(str, e.shape))
                    else:
                        self.put(key, e.reshape(-1, e.shape[-1]))
                self.meta[f"{base}.pool{j}.meta_state"] = json.dumps(pool.meta_state)


def checkpoint_digest(ckpt):
    """sha256 over config.json and the *.safetensors files (sorted): each name, then the raw sha256 of
    its bytes; the digest src/model/checkpoint/digest.ts and harness/hf_reference.py compute."""
    import hashlib
    h = hashlib.sha256()
    for name in ["config.json"] + sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors")):
        h.update(name.encode())
        h.update(hashlib.sha256(open(os.path.join(ckpt, name), "rb").read()).digest())
    return h.hexdigest()


def attn_input_recorder(model, store):
    """Wraps each layer's attention so its input (the post-attn_norm activations) is recorded."""
    for i, layer in enumerate(model.layers):
        attn = layer.attn
        original = type(attn).__call__

        def call(self, x, *a, _i=i, _orig=original, **kw):
            if store.get("on"):
                store.setdefault(_i, []).append(x)
            return _orig(self, x, *a, **kw)
        layer.attn.__class__ = type(type(attn).__name__, (type(attn),), {"__call__": call})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokens", required=True, help="JSON: a list of ids, or an object with `ids`")
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "stored"], default="float32")
    ap.add_argument("--quantize", action="store_true")
    ap.add_argument("--block-size", type=int, default=256)
    ap.add_argument("--chunks", default="", help="comma-separated chunk sizes for the chunked leg (default: block boundaries)")
    ap.add_argument("--decode", type=int, default=12)
    ap.add_argument("--decode-snapshots", default="", help="decode steps (0-based) whose caches are kept besides the last")
    ap.add_argument("--take", type=int, default=0, help="use only the first N prompt tokens")
    ap.add_argument("--case", required=True)
    ap.add_argument("--no-attn-inputs", action="store_true")
    ap.add_argument("--no-oneshot-cache", action="store_true", help="keep only the one-shot logits (fixture size)")
    ap.add_argument("--no-decode-cache", action="store_true", help="keep only the decode logits (fixture size)")
    ap.add_argument("--save-cache-weights", default="", help="also write the cache path's weights as MLX holds them (quantized codes, scales, biases) to this file")
    ap.add_argument("--no-chunked-cache", action="store_true", help="keep only the chunked leg's logits (fixture size)")
    ap.add_argument("--logits-only", action="store_true", help="keep no cache state at all, only logits and tokens (fixture size)")
    ap.add_argument("--last-boundary-only", action="store_true", help="keep the chunked leg's cache only at its end (fixture size)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.logits_only:
        a.no_oneshot_cache = a.no_decode_cache = a.no_chunked_cache = True
    mx.set_default_device(mx.cpu)
    t0 = time.time()
    model, config = load(a.ckpt, a.dtype, a.quantize)
    tok = json.load(open(a.tokens))
    ids = tok["ids"] if isinstance(tok, dict) else tok
    if a.take:
        ids = ids[: a.take]
    T = len(ids)
    d = Dump(model.args.sliding_window)
    d.put("input_ids", mx.array(ids, dtype=mx.int32))
    store = {}
    if not a.no_attn_inputs:
        attn_input_recorder(model, store)

    # One-shot prefill.
    store["on"] = True
    cache = model.make_cache()
    logits = model(mx.array([ids]), cache=cache)
    mx.eval(logits)
    store["on"] = False
    d.put("oneshot.logits_last", logits[0, -1])
    if not a.no_oneshot_cache:
        d.cache("oneshot", cache)
    for i in range(len(model.layers)):
        if i in store:
            d.put(f"oneshot.layers.{i}.attn_input", mx.concatenate(store[i], axis=1)[0])

    # Chunked prefill, a snapshot at every chunk end (block boundaries unless --chunks).
    if a.chunks:
        sizes = [int(s) for s in a.chunks.split(",")]
        if sum(sizes) != T:
            raise SystemExit(f"--chunks add up to {sum(sizes)}, the prompt has {T} tokens")
    else:
        sizes = [a.block_size] * (T // a.block_size) + ([T % a.block_size] if T % a.block_size else [])
    cache = model.make_cache()
    at = 0
    boundaries = []
    for n in sizes:
        logits = model(mx.array([ids[at:at + n]]), cache=cache)
        mx.eval(logits)
        at += n
        boundaries.append(at)
        d.put(f"chunked.{at}.logits_last", logits[0, -1])
        if not a.no_chunked_cache and (at == T or not a.last_boundary_only):
            d.cache(f"chunked.{at}", cache)

    # Greedy decode from the chunked cache, a snapshot after every step.
    greedy = []
    snap_steps = {int(x) for x in a.decode_snapshots.split(",") if x}
    nxt = int(mx.argmax(logits[0, -1]).item())
    for step in range(a.decode):
        greedy.append(nxt)
        logits = model(mx.array([[nxt]]), cache=cache)
        mx.eval(logits)
        d.put(f"decode.{step}.logits", logits[0, -1])
        if (step == a.decode - 1 and not a.no_decode_cache) or step in snap_steps:
            d.cache(f"decode.{step}", cache)
        nxt = int(mx.argmax(logits[0, -1]).item())

    if a.save_cache_weights:
        # What the cache is computed from, given a layer's attention input: the window's projection
        # and norm, and every compressor's projections, position bias and norm (MLX's own arrays).
        keep = (".attn.wkv.", ".attn.kv_norm.", ".attn.compressor.", ".attn.indexer.compressor.")
        params = {k: v for k, v in tree_flatten(model.parameters()) if any(t in k for t in keep)}
        mx.save_safetensors(a.save_cache_weights, params, metadata={
            "producer": "harness/mlx/omlx_reference.py", "case": a.case, "checkpoint_sha256": checkpoint_digest(a.ckpt),
            "quantization": json.dumps({k: sorted(v) for k, v in getattr(model, "quantization_modes", {}).items()})})

    srcs = json.load(open(os.path.join(HERE, ".omlx", "site", "sources.json")))
    build = json.load(open(os.path.join(HERE, ".work", "mlx-build.json")))
    meta = {
        "producer": "harness/mlx/omlx_reference.py",
        "case": a.case, "tokens": str(T), "dtype": a.dtype, "quantized": "1" if a.quantize else "0",
        "block_size": str(a.block_size), "chunks": ",".join(map(str, sizes)),
        "boundaries": ",".join(map(str, boundaries)), "greedy": json.dumps(greedy),
        "mlx_version": mx.__version__, "mlx_commit": build["mlx"]["commit"],
        "mlx_lm_commit": srcs["mlx_lm"]["commit"],
        "model_code": "jundot/omlx omlx/patches/deepseek_v4 (harness/mlx/omlx-files.json)",
        "device": "cpu", "seconds": f"{time.time() - t0:.1f}",
        "checkpoint_sha256": checkpoint_digest(a.ckpt),
    }
    modes = getattr(model, "quantization_modes", {})
    meta["quantization"] = json.dumps({k: sorted({p.split(".", 3)[-1] if p.startswith("model.layers.") else p for p in v}) for k, v in modes.items()})
    meta.update(d.meta)
    mx.save_safetensors(a.out, d.tensors, metadata=meta)
    print(json.dumps({"case": a.case, "tensors": len(d.tensors), "greedy": greedy, "seconds": round(time.time() - t0, 1)}))


if __name__ == "__main__":
    main()
