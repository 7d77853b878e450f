"""The oMLX-side adapter (src/engines/omlx/adapter/pd_bridge_omlx_index.py) against oMLX's own
PagedSSDCacheManager (the cache stack gather-cache.sh lays out, jundot/omlx 1e8a6074, on MLX's CPU):

  1. a manager is made on an empty directory (its startup scan finds nothing);
  2. a block oMLX itself wrote (harness/fixtures/mlx/omlx-blocks/tiny-t301-mxq) is copied in afterwards:
     without the adapter the manager does not find it (has_block False), which is why it exists;
  3. after install(): has_block and get_block_metadata find it, indexed with oMLX's own metadata;
  4. the same bytes under another block's name are refused (its block_hash is not the name asked for);
  5. a manager for another model name does not index it (oMLX's own compatibility check);
  6. load_block restores it through oMLX's own reader.
Run: harness/mlx/test-omlx-adapter.sh (needs MLX in harness/mlx/.work/python, gather.sh and gather-cache.sh run).
Prints one line per check and 'N passed, M failed'; exits non-zero on a failure.
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

here = Path(__file__).resolve().parent
root = here.parent.parent
sys.path.insert(0, str(root / "src" / "engines" / "omlx" / "adapter"))

sys.path.insert(0, str(here))
import omlx_install  # noqa: E402,F401  (ours: oMLX's DeepSeek-V4 model and cache classes into mlx_lm, as its patch does)
import omlx.patches.deepseek_v4.cache_handlers  # noqa: E402,F401  (registers PoolingCache's handlers, as oMLX does)
from omlx.cache.paged_ssd_cache import PagedSSDCacheManager  # noqa: E402
import pd_bridge_omlx_index as adapter  # noqa: E402

proof = json.load(open(root / "harness/fixtures/mlx/prefix-cache-proof.json"))["cases"]["tiny-t301-mxq"]
fixture_dir = root / "harness/fixtures/mlx/omlx-blocks/tiny-t301-mxq"
[block_file] = sorted(fixture_dir.glob("[0-9a-f]/*.safetensors"))
key = bytes.fromhex(block_file.stem)
model_name, block_size = proof["model_name"], proof["block_size"]
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")


def manager(store, name=model_name):
    layers = len(json.loads(_meta["layer_cache_types"]))  # the tiny checkpoint's cache layers, as the block says
    return PagedSSDCacheManager(cache_dir=Path(store), max_size_bytes=1024 ** 3, expected_model_name=name,
                                expected_num_layers=layers, expected_block_size=block_size,
                                expected_block_size_tokens=block_size)


import mlx.core as mx  # noqa: E402
_, _meta = mx.load(str(block_file), return_metadata=True)

with tempfile.TemporaryDirectory() as tmp:
    store = Path(tmp) / "cache"
    ssd = manager(store)
    dest = store / block_file.parent.name / block_file.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(block_file, dest)
    check("without the adapter a block written after load is not found", not ssd.has_block(key))
    adapter.install(PagedSSDCacheManager)
    adapter.install(PagedSSDCacheManager)  # twice is once
    check("after install() has_block finds it", ssd.has_block(key))
    meta = ssd.get_block_metadata(key)
    check("indexed with oMLX's own metadata", meta is not None and meta.block_hash == key and meta.model_name == model_name
          and meta.block_size == block_size, f"{meta.token_count if meta else None} tokens")
    # the same bytes filed under another key: its block_hash says otherwise
    other = bytes(32 * [0xAB])
    wrong = store / other.hex()[0] / f"{other.hex()}.safetensors"
    wrong.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(block_file, wrong)
    check("a file whose block_hash is not its name is refused", not ssd.has_block(other) and ssd.get_block_metadata(other) is None)
    check("a missing file is a plain miss", not ssd.has_block(bytes(32 * [0x01])))
    loaded = ssd.load_block(key)
    check("oMLX's own load_block restores it", loaded is not None and len(loaded) == meta.num_layers, f"{len(loaded) if loaded else 0} layers")
    ssd.close()

with tempfile.TemporaryDirectory() as tmp:
    store = Path(tmp) / "cache"
    ssd = manager(store, name="/Users/someone/models/another-model")
    dest = store / block_file.parent.name / block_file.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(block_file, dest)
    check("a manager for another model does not index it (oMLX's compatibility check)", not ssd.has_block(key))
    ssd.close()

passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
