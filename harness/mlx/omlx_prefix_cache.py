#!/usr/bin/env python3
"""oMLX's own prefix-cache path on MLX's CPU backend: oMLX writes blocks from its DeepSeek-V4 model's
native prefill, and oMLX restores blocks (its own, and this project's) and decodes from them.

  native    a fresh make_cache(); the prompt's full blocks are prefilled one block per call and at each
            boundary the scheduler's own extraction (Scheduler._extract_cache_states and
            _normalize_rotating_snapshot_state, run from oMLX's scheduler.py as it is) takes a boundary
            snapshot, compacted by pooling_delta.compact_pooling_cache_snapshot as oMLX's boundary
            snapshot store does; then BlockAwarePrefixCache.store_cache writes the blocks through
            PagedSSDCacheManager into --omlx-store; then the tail [B, T) and greedy decode steps.
  restored  for each store (oMLX's, then --ours if given): a new PagedSSDCacheManager scans the
            directory, BlockAwarePrefixCache.fetch_cache + reconstruct_cache build the model's cache
            from the blocks, and the same tail and decode run from it.

With --save-attn-inputs FILE the native prefill also records every layer's attention input (the
post-attn_norm rows omlx_reference.attn_input_recorder sees) over [0, B), block by block as MLX
computed them, into FILE as `prefill.layers.{i}.attn_input` [B, hidden] in the model's dtype: what a
prefill engine running oMLX's model hands the product's capture hook (harness/mlx/product-blocks.ts
--attn-inputs).

The only code here that is ours: loading the checkpoint (omlx_reference.load), the prefill loop that
stands in for the scheduler's chunked prefill, one registry method the stored type_registry lacks
(is_arrays_family: our class names are never in the arrays family), the recording, and the comparison.

    python3 harness/mlx/omlx_prefix_cache.py --ckpt DIR --tokens FILE [--take N] --dtype float32 [--quantize] \
        --block-size 256 --decode 12 --model-name NAME --omlx-store DIR [--ours NAME=DIR] \
        [--save-attn-inputs FILE] --out FILE.json
"""
import argparse
import ast
import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, ".omlx", "cache-site")
sys.path[:0] = [SITE, os.path.join(HERE, ".work", "python")]
os.environ.setdefault("OMLX_DSV4_WSDPA", "0")

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import omlx_install  # noqa: E402,F401  (ours: installs oMLX's model into mlx_lm, as its patch does)
from omlx_reference import attn_input_recorder, checkpoint_digest, load  # noqa: E402

from omlx.cache.type_registry import CacheTypeRegistry  # noqa: E402
from omlx.cache.type_handlers import CacheType  # noqa: E402
from omlx.cache.hybrid_cache import ModelCacheConfig  # noqa: E402
from omlx.cache.paged_cache import PagedCacheManager  # noqa: E402
from omlx.cache.paged_ssd_cache import PagedSSDCacheManager  # noqa: E402
from omlx.cache.prefix_cache import BlockAwarePrefixCache  # noqa: E402
from omlx.cache.pooling_delta import compact_pooling_cache_snapshot  # noqa: E402
from omlx.patches.deepseek_v4.cache_handlers import BatchPoolingCacheHandler, PoolingCacheHandler  # noqa: E402

log = logging.getLogger("omlx_prefix_cache")


def register_handlers():
    """What oMLX's deepseek_v4 patch does in _register_cache_handlers, plus the one missing method."""
    CacheTypeRegistry.register(PoolingCacheHandler())
    CacheTypeRegistry.register(BatchPoolingCacheHandler())
    if not hasattr(CacheTypeRegistry, "is_arrays_family"):
        def is_arrays_family(cls, class_name):
            return cls._class_name_map.get(class_name) == CacheType.ARRAYS_CACHE
        CacheTypeRegistry.is_arrays_family = classmethod(is_arrays_family)


def scheduler_methods():
    """Scheduler._normalize_rotating_snapshot_state and _extract_cache_states from oMLX's scheduler.py,
    compiled as they are, bound to an object that has only what they read (model_name)."""
    path = os.path.join(SITE, "omlx_sources", "scheduler.py")
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Scheduler")
    wanted = {"_normalize_rotating_snapshot_state", "_extract_cache_states"}
    fns = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    if {f.name for f in fns} != wanted:
        sys.exit(f"scheduler.py lacks {wanted - {f.name for f in fns}}")
    ns = {"mx": mx, "Any": Any, "Optional": Optional, "logger": logging.getLogger("omlx.scheduler"),
          "HAS_CACHE_TYPE_HANDLERS": True, "CacheTypeRegistry": CacheTypeRegistry,
          "ModelCacheConfig": ModelCacheConfig}
    exec(compile(ast.Module(body=fns, type_ignores=[]), path, "exec"), ns)

    class SchedulerParts:
        _normalize_rotating_snapshot_state = ns["_normalize_rotating_snapshot_state"]
        _extract_cache_states = ns["_extract_cache_states"]

        def __init__(self, model_name):
            self.model_name = model_name

    return SchedulerParts


def eval_tree(x):
    arrays = []

    def walk(v):
        if isinstance(v, mx.array):
            arrays.append(v)
        elif isinstance(v, (list, tuple)):
            for e in v:
                walk(e)
        elif isinstance(v, dict):
            for e in v.values():
                walk(e)
    walk(x)
    mx.eval(arrays)


def managers(model, store, block_size, model_name):
    """The three managers wired as Scheduler._init_tiered_cache wires them (no hot cache)."""
    paged = PagedCacheManager(block_size=block_size, max_blocks=4096, model_name=model_name, initial_blocks=64)
    prefix = BlockAwarePrefixCache(model=model, paged_cache_manager=paged)
    ssd = PagedSSDCacheManager(cache_dir=Path(store), max_size_bytes=8 * 1024 ** 3, expected_model_name=model_name,
                               expected_num_layers=len(model.layers), expected_block_size=block_size,
                               expected_block_size_tokens=block_size)
    paged.set_paged_ssd_cache_manager(ssd)
    prefix.set_paged_ssd_cache_manager(ssd)
    return ssd, prefix


def step(model, cache, ids):
    logits = model(mx.array([ids]), cache=cache)
    mx.eval(logits)
    return logits[0, -1].astype(mx.float32)


def continue_from(model, cache, tail, decode):
    """The tail in one call, then greedy decode steps; every call's last-position logits."""
    out = [step(model, cache, tail)]
    tokens = []
    for _ in range(decode):
        tok = int(mx.argmax(out[-1]).item())
        tokens.append(tok)
        out.append(step(model, cache, [tok]))
    return [np.array(x) for x in out], tokens


def native(model, sched, tokens, block_size, decode, store, model_name, recorded=None):
    """recorded: a dict attn_input_recorder fills while recorded["on"] (the block loop only)."""
    boundary = (len(tokens) // block_size) * block_size
    cache = model.make_cache()
    snapshots = {}
    for start in range(0, boundary, block_size):
        if recorded is not None:
            recorded["on"] = True
        step(model, cache, tokens[start:start + block_size])
        if recorded is not None:
            recorded["on"] = False
        extracted, _ = sched._extract_cache_states(cache)
        eval_tree(extracted)
        snapshots[start + block_size] = compact_pooling_cache_snapshot(extracted, start + block_size, block_size)
        eval_tree(snapshots[start + block_size])
    final, mcc = sched._extract_cache_states(cache)
    eval_tree(final)
    ssd, prefix = managers(model, store, block_size, model_name)
    table = prefix.store_cache("native", tokens[:boundary], final, model_cache_config=mcc, boundary_snapshots=snapshots)
    if table is None or len(table.block_ids) != boundary // block_size:
        sys.exit(f"oMLX stored {0 if table is None else len(table.block_ids)} blocks, expected {boundary // block_size}")
    ssd.close()  # flushes the writer thread: every block is on disk before anything reads the store
    logits, greedy = continue_from(model, cache, tokens[boundary:], decode)
    return boundary, logits, greedy


def restored(model, tokens, block_size, decode, store, model_name):
    ssd, prefix = managers(model, store, block_size, model_name)
    table, remaining = prefix.fetch_cache("restore", list(tokens))
    cache = prefix.reconstruct_cache(table) if table is not None else None
    ssd.close()
    if table is None:
        return {"restored": False, "why": "fetch_cache found no cached prefix"}
    if cache is None:
        return {"restored": False, "why": "reconstruct_cache returned None", "blocks_found": len(table.block_ids)}
    logits, greedy = continue_from(model, cache, list(remaining), decode)
    return {"restored": True, "blocks": len(table.block_ids), "tokens_restored": len(tokens) - len(remaining),
            "logits": logits, "greedy": greedy}


def save_attn_inputs(path, recorded, layers, tokens, boundary, block_size, ckpt):
    """Each layer's recorded chunks (one per block) joined in position order: [B, hidden]."""
    tensors = {"input_ids": mx.array(tokens, dtype=mx.int32)}
    for i in range(layers):
        chunks = [x[0] for x in recorded.get(i, [])]
        if len(chunks) != boundary // block_size:
            sys.exit(f"layer {i}: {len(chunks)} attention calls recorded, expected {boundary // block_size}")
        tensors[f"prefill.layers.{i}.attn_input"] = mx.concatenate(chunks, axis=0)
    mx.save_safetensors(path, tensors, metadata={
        "producer": "harness/mlx/omlx_prefix_cache.py", "checkpoint_sha256": checkpoint_digest(ckpt),
        "rows": str(boundary), "chunks": ",".join([str(block_size)] * (boundary // block_size)), "mlx_version": mx.__version__})


def distance(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    d = np.abs(a - b)
    return {"identical": int(np.sum(a.view(np.uint32) == b.view(np.uint32))), "elements": int(a.size),
            "max_abs": float(d.max()), "rel_norm": float(np.linalg.norm(a - b) / np.linalg.norm(b))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--take", type=int)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--quantize", action="store_true")
    ap.add_argument("--block-size", type=int, default=256)
    ap.add_argument("--decode", type=int, default=12)
    ap.add_argument("--model-name", required=True)
    ap.add_argument("--omlx-store", required=True)
    ap.add_argument("--ours", action="append", default=[], help="NAME=DIR: a store this project wrote")
    ap.add_argument("--save-attn-inputs", help="FILE: every layer's attention input over [0, B) of the native prefill")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    logging.basicConfig(level=os.environ.get("OMLX_LOG", "WARNING"))
    register_handlers()
    sched = scheduler_methods()(a.model_name)
    parsed = json.load(open(a.tokens))
    tokens = parsed if isinstance(parsed, list) else parsed["ids"]
    tokens = tokens[: a.take] if a.take else tokens
    model, _ = load(a.ckpt, a.dtype, a.quantize)
    shutil.rmtree(a.omlx_store, ignore_errors=True)
    recorded = None
    if a.save_attn_inputs:
        recorded = {}
        attn_input_recorder(model, recorded)
    boundary, n_logits, n_greedy = native(model, sched, tokens, a.block_size, a.decode, a.omlx_store, a.model_name, recorded)
    if recorded is not None:
        save_attn_inputs(a.save_attn_inputs, recorded, len(model.layers), tokens[:boundary], boundary, a.block_size, a.ckpt)
    sources = json.load(open(os.path.join(SITE, "sources.json")))
    for manifest in ("omlx-files.json", "omlx-cache-files.json"):
        sources[manifest] = [{k: f[k] for k in ("repo", "path", "commit", "sha256")} for f in json.load(open(os.path.join(HERE, manifest)))["files"]]
    report = {"producer": "harness/mlx/omlx_prefix_cache.py", "mlx": {"version": mx.__version__},
              "sources": sources, "checkpoint": checkpoint_digest(a.ckpt), "dtype": a.dtype, "quantize": a.quantize,
              "tokens": len(tokens), "boundary": boundary, "block_size": a.block_size, "model_name": a.model_name,
              "native": {"greedy": n_greedy}, "stores": {}}
    for name, store in [("omlx", a.omlx_store)] + [tuple(s.split("=", 1)) for s in a.ours]:
        r = restored(model, tokens, a.block_size, a.decode, store, a.model_name)
        if r["restored"]:
            steps = [distance(x, y) for x, y in zip(r.pop("logits"), n_logits)]
            r["logits_bit_identical_steps"] = sum(s["identical"] == s["elements"] for s in steps)
            r["logits_steps"] = len(steps)
            r["logits_rel_error_max"] = max(s["rel_norm"] for s in steps)
            r["logits_max_abs"] = max(s["max_abs"] for s in steps)
            r["greedy_equal"] = r["greedy"] == n_greedy
        report["stores"][name] = r
        print(name, json.dumps({k: v for k, v in r.items() if k != "greedy"}))
    json.dump(report, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
