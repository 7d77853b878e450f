#!/usr/bin/env bash
# The exact-restore proof (harness/fixtures/mlx/exact-restore-proof.json): blocks the bridge computes
# with the mlx-cpu cache arithmetic restore into oMLX's own DeepSeek-V4 model (MLX CPU, bf16 +
# quantized as omlx_reference.py's mxq case) bit for bit.
#   1. harness/mlx/omlx_exact_native.py  MLX: one-shot prefill of B = 256 tokens (attention inputs,
#      cache weights, its cache), then the native tail (45 tokens) and 12 greedy decode steps;
#   2. harness/mlx/exact-blocks.ts       ours: mlxCpuLayerCache per layer -> ModelCache ->
#      cacheToBlockPayload(..., 0, 256, {storage: 'bf16-if-exact'}) -> the block store + index.json;
#   3. harness/mlx/omlx_exact_restore.py MLX: our block into a fresh make_cache(), the same tail and
#      decode, logits compared bit for bit (and every restored cache array element by element).
# Needs MLX's Python bindings in harness/mlx/.work/python and harness/mlx/gather.sh run once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT:-$root/harness/fixtures/mlx/exact-restore-proof.json}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export PYTHONPATH="$here/.work/python${PYTHONPATH:+:$PYTHONPATH}"
tokens="$root/harness/fixtures/tokens-301.json"
"$root/node_modules/.bin/pd-bridge" make-checkpoint --preset tiny --seed 1 --out "$tmp/tiny" >/dev/null
python3 "$here/omlx_exact_native.py" --ckpt "$tmp/tiny" --tokens "$tokens" --block-size 256 --decode 12 \
  --out "$tmp/native.safetensors" --weights-out "$tmp/cache-weights.safetensors"
(cd "$root" && node_modules/.bin/tsx harness/mlx/exact-blocks.ts --ckpt "$tmp/tiny" --native "$tmp/native.safetensors" \
  --weights "$tmp/cache-weights.safetensors" --tokens "$tokens" --block-size 256 --out "$tmp/blocks")
python3 "$here/omlx_exact_restore.py" --ckpt "$tmp/tiny" --blocks "$tmp/blocks" --native "$tmp/native.safetensors" --out "$out"
