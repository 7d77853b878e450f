#!/usr/bin/env bash
# The prefix-cache proof (harness/fixtures/mlx/prefix-cache-proof.json) and oMLX-written block
# fixtures (harness/fixtures/mlx/omlx-blocks/): oMLX's own prefix-cache code (BlockAwarePrefixCache,
# PagedSSDCacheManager, pooling deltas; harness/mlx/omlx-cache-files.json) on MLX's CPU backend
#   1. writes blocks from its DeepSeek-V4 model's native prefill and restores them (its own round trip);
#   2. restores blocks this project's bridge writes, and decodes from them, against the native run:
#      f32     our f32 engine's blocks (harness/mlx/write-blocks.ts): tolerance-based, two engines;
#      mlx-cpu blocks from the mlx-cpu cache arithmetic (harness/mlx/exact-blocks.ts) over MLX's own
#              attention inputs, bf16 + quantized as omlx_reference.py's mxq case: bit for bit.
# Needs MLX's Python bindings in harness/mlx/.work/python, harness/mlx/gather.sh and gather-cache.sh run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
fx="$root/harness/fixtures"
out="$fx/mlx"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export PYTHONPATH="$here/.work/python${PYTHONPATH:+:$PYTHONPATH}"
name="pd-bridge-tiny-seed1"
"$root/node_modules/.bin/pd-bridge" make-checkpoint --preset tiny --seed 1 --out "$tmp/tiny" >/dev/null
# f32: 777 tokens, three full blocks and a 9-token tail
(cd "$root" && node_modules/.bin/tsx harness/mlx/write-blocks.ts --ckpt "$tmp/tiny" --tokens "$fx/tokens-777.json" --profile f32 --block-size 256 --model-name "$name" --out "$tmp/f32")
python3 "$here/omlx_prefix_cache.py" --ckpt "$tmp/tiny" --tokens "$fx/tokens-777.json" --dtype float32 --block-size 256 --decode 12 \
  --model-name "$name" --omlx-store "$tmp/omlx-f32" --ours "f32=$tmp/f32/store" --out "$tmp/f32.json"
# mlx-cpu: 301 tokens, one block and a 45-token tail
python3 "$here/omlx_exact_native.py" --ckpt "$tmp/tiny" --tokens "$fx/tokens-301.json" --block-size 256 --decode 12 \
  --out "$tmp/native.safetensors" --weights-out "$tmp/cache-weights.safetensors"
(cd "$root" && node_modules/.bin/tsx harness/mlx/exact-blocks.ts --ckpt "$tmp/tiny" --native "$tmp/native.safetensors" \
  --weights "$tmp/cache-weights.safetensors" --tokens "$fx/tokens-301.json" --block-size 256 --model-name "$name" --out "$tmp/exact")
python3 "$here/omlx_prefix_cache.py" --ckpt "$tmp/tiny" --tokens "$fx/tokens-301.json" --dtype bfloat16 --quantize --block-size 256 --decode 12 \
  --model-name "$name" --omlx-store "$tmp/omlx-mxq" --ours "mlx-cpu=$tmp/exact/store" --out "$tmp/mxq.json"
python3 - "$tmp/f32.json" "$tmp/mxq.json" "$out/prefix-cache-proof.json" <<'PY'
import json, sys
cases = {"tiny-t777-f32": json.load(open(sys.argv[1])), "tiny-t301-mxq": json.load(open(sys.argv[2]))}
json.dump({"producer": "harness/mlx/make-prefix-cache-proof.sh", "cases": cases}, open(sys.argv[3], "w"), indent=1)
open(sys.argv[3], "a").write("\n")
PY
# oMLX's own blocks, for suites/mlx/omlx-blocks.test.ts to compare ours against (and the MLX attention
# inputs the mlx-cpu block is computed from)
rm -rf "$out/omlx-blocks"; mkdir -p "$out/omlx-blocks"
cp -r "$tmp/omlx-f32" "$out/omlx-blocks/tiny-t777-f32"; cp -r "$tmp/omlx-mxq" "$out/omlx-blocks/tiny-t301-mxq"
python3 - "$tmp/native.safetensors" "$out/omlx-blocks/tiny-t301-mxq-attn-inputs.safetensors" <<'PY'
import sys
import mlx.core as mx
t, m = mx.load(sys.argv[1], return_metadata=True)
keep = {k: v for k, v in t.items() if k == "input_ids" or (k.startswith("oneshot.layers.") and k.endswith(".attn_input"))}
mx.save_safetensors(sys.argv[2], keep, {k: m[k] for k in ("checkpoint_sha256",) if k in m})
PY
# (the cache weights are tiny-mxq-cache-weights.safetensors: the same tensors, made by omlx_reference.py)
find "$out/omlx-blocks" -name '*.safetensors' | sort
