#!/usr/bin/env bash
# The exact commands that made harness/fixtures/mlx/: oMLX's DeepSeek-V4 model on MLX's CPU backend
# (harness/mlx/omlx_reference.py) over our checkpoints, then the summary of how our profiles compare
# (harness/mlx/summarize.ts). Needs MLX's Python bindings in harness/mlx/.work/python and
# harness/mlx/gather.sh and gather-cache.sh run once; Node for the checkpoints and the summary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/harness/fixtures/mlx"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
pdb="$root/node_modules/.bin/pd-bridge"
"$pdb" make-checkpoint --preset tiny --seed 1 --out "$tmp/tiny" >/dev/null
"$pdb" make-checkpoint --preset flash-schedule --seed 1 --out "$tmp/flash" >/dev/null
fx="$root/harness/fixtures"
ref() { python3 "$here/omlx_reference.py" "$@"; }
# tiny: below the window's first block, and one past the original YaRN window (1024) whose decode
# steps complete a 128-token window at 1024.
ref --ckpt "$tmp/tiny" --tokens "$fx/tokens-301.json" --dtype float32 --block-size 256 --decode 12 --case tiny-t301-f32 --out "$out/tiny-t301-f32.safetensors"
ref --ckpt "$tmp/tiny" --tokens "$fx/tokens-1100.json" --take 1020 --dtype float32 --block-size 256 --decode 12 --no-attn-inputs --no-oneshot-cache --last-boundary-only --case tiny-t1020-f32 --out "$out/tiny-t1020-f32.safetensors"
ref --ckpt "$tmp/tiny" --tokens "$fx/tokens-301.json" --dtype bfloat16 --quantize --block-size 256 --decode 12 --case tiny-t301-mxq --save-cache-weights "$out/tiny-mxq-cache-weights.safetensors" --out "$out/tiny-t301-mxq.safetensors"
# the checkpoint transformers made, past its original window of 512
ref --ckpt "$fx/hf-saved" --tokens "$fx/tokens-777.json" --dtype float32 --block-size 256 --decode 12 --no-attn-inputs --no-oneshot-cache --no-decode-cache --case hfsaved-t777-f32 --out "$out/hfsaved-t777-f32.safetensors"
# V4-Flash's 43-layer schedule
ref --ckpt "$tmp/flash" --tokens "$fx/tokens-301.json" --dtype float32 --block-size 256 --decode 4 --no-attn-inputs --logits-only --case flash-t301-f32 --out "$out/flash-t301-f32.safetensors"
ref --ckpt "$tmp/flash" --tokens "$fx/tokens-301.json" --dtype bfloat16 --quantize --block-size 256 --decode 4 --no-chunked-cache --no-decode-cache --case flash-t301-mxq --save-cache-weights "$out/flash-mxq-cache-weights.safetensors" --out "$out/flash-t301-mxq.safetensors"
# Our f32 blocks of a 1,100-token prompt restored into oMLX's model (tolerance-based: f32 caches of two
# engines), once as written and once with the window's unread first row overwritten by noise.
(cd "$root" && npx tsx harness/mlx/write-blocks.ts --ckpt "$tmp/tiny" --tokens "$fx/tokens-1100.json" --profile f32 --block-size 256 --out "$tmp/blocks")
python3 "$here/omlx_restore.py" --ckpt "$tmp/tiny" --blocks "$tmp/blocks" --decode 12 --out "$out/restore-proof.json"
python3 "$here/omlx_restore.py" --ckpt "$tmp/tiny" --blocks "$tmp/blocks" --decode 12 --zero-first-row random --out "$out/restore-proof-noisy-first-row.json"
# Blocks computed with the mlx-cpu arithmetic restored bit for bit.
OUT="$out/exact-restore-proof.json" bash "$here/make-exact-restore-proof.sh"
# oMLX's own prefix cache: blocks it writes, and ours restored through it (needs gather-cache.sh run once).
bash "$here/make-prefix-cache-proof.sh"
(cd "$root" && npx tsx harness/mlx/summarize.ts --tiny "$tmp/tiny" --flash "$tmp/flash" --hf-saved "$fx/hf-saved" --fixtures "$out" --out "$out/summary.json")
