#!/usr/bin/env bash
# The product-bridge proof (harness/fixtures/mlx/product-bridge.json, written here and never by hand):
# blocks the product writes into an oMLX cache directory through the omlx decoder kind are restored by
# oMLX's own prefix-cache code (BlockAwarePrefixCache + PagedSSDCacheManager, jundot/omlx 1e8a6074, on
# MLX's CPU backend: harness/mlx/omlx_prefix_cache.py), which then decodes the tail and 12 greedy steps;
# logits and greedy tokens against oMLX's own prefill of the same prompt. Per case:
#   1. (mlx-cpu cases) harness/mlx/omlx_prefix_cache.py --save-attn-inputs: oMLX's native prefill
#      block by block, recording every layer's attention input over the usable blocks;
#   2. harness/mlx/product-blocks.ts   the product's path (harness/mlx/product-bridge.ts): the capture
#      hook under the sidecar over the usable blocks' tokens, then the front door's omlx target
#      (openWriter/writeNext/finalize) into <case>/omlx-store;
#   3. harness/mlx/omlx_prefix_cache.py  oMLX: native prefill block by block (the same bits as step 1),
#      its own blocks into its own store, then a fresh manager restores each store (oMLX's own, then
#      the product's) and decodes.
# Two cache maths, one sidecar each:
#   f32      export-weights --profile f32; oMLX runs the float32 checkpoint; the hook's attention
#            inputs come from our engine's live f32 prefill. Two engines' float32: logits tolerance-based.
#   mlx-cpu  export-weights --profile decoder --cache-math mlx-cpu (the cache path's weights as
#            mlx_lm.convert quantizes them); oMLX runs the same checkpoint bf16 + quantized as
#            mlx_lm.convert does (omlx_reference.load). The hook's attention inputs are the rows oMLX's
#            model computed (our engine does not reproduce MLX's whole forward: docs/engine.md); the
#            cache arithmetic, the block mapping and the writer are the product's. Logits bit for bit.
# Cases: tiny 301 tokens (not a multiple of the block size), tiny 1,100 tokens (past the native window
# of 1,024 under YaRN), each with both cache maths; with FLASH=1 the 43-layer V4-Flash schedule at 301.
# ONLY=REGEX keeps the cases whose line ('preset take tokens-file math') matches (with OUT=FILE, to try one).
# The oMLX-written blocks are kept in harness/fixtures/mlx/product-bridge-blocks/<case>/ (and, for
# mlx-cpu cases, <case>-attn-inputs.safetensors) for suites/mlx/product-bridge-blocks.test.ts.
# Needs MLX (harness/mlx/build-mlx.sh), harness/mlx/gather.sh and gather-cache.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
fx="$root/harness/fixtures"
out="${OUT:-$fx/mlx/product-bridge.json}"
blocks_out="$(dirname "$out")/product-bridge-blocks"  # beside the record: OUT=/tmp/x.json leaves the fixtures alone
[ -d "$here/.work/python/mlx" ] || { echo "make-product-bridge-proof: run harness/mlx/build-mlx.sh first" >&2; exit 1; }
[ -d "$here/.omlx/cache-site" ] || { echo "make-product-bridge-proof: run harness/mlx/gather.sh and gather-cache.sh first" >&2; exit 1; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export PYTHONPATH="$here/.work/python${PYTHONPATH:+:$PYTHONPATH}"
bs=256
cases=("tiny 301 tokens-301.json f32" "tiny 1100 tokens-1100.json f32" "tiny 301 tokens-301.json mlx-cpu" "tiny 1100 tokens-1100.json mlx-cpu")
[ "${FLASH:-0}" = 1 ] && cases+=("flash-schedule 301 tokens-301.json f32" "flash-schedule 301 tokens-301.json mlx-cpu")
[ -n "${ONLY:-}" ] && mapfile -t cases < <(printf '%s\n' "${cases[@]}" | grep -E "$ONLY")
for preset in $(printf '%s\n' "${cases[@]}" | awk '{print $1}' | sort -u); do
  "$root/node_modules/.bin/pd-bridge" make-checkpoint --preset "$preset" --seed 1 --out "$tmp/$preset" >/dev/null
  "$root/node_modules/.bin/pd-bridge" export-weights --model "$tmp/$preset" --profile f32 --block-size "$bs" --out "$tmp/$preset-f32" >/dev/null
  "$root/node_modules/.bin/pd-bridge" export-weights --model "$tmp/$preset" --profile decoder --cache-math mlx-cpu --block-size "$bs" --out "$tmp/$preset-mlx-cpu" >/dev/null
done
records=()
for c in "${cases[@]}"; do
  read -r preset take tokens math <<<"$c"
  name="$preset-t$take"; [ "$math" = mlx-cpu ] && name="$name-mlx-cpu"
  model_name="pd-bridge-$preset-seed1"
  omlx=(python3 "$here/omlx_prefix_cache.py" --ckpt "$tmp/$preset" --tokens "$fx/$tokens" --take "$take" --block-size "$bs"
        --decode 12 --model-name "$model_name" --omlx-store "$tmp/$name-omlx")
  ours=()
  if [ "$math" = mlx-cpu ]; then
    omlx+=(--dtype bfloat16 --quantize); ours=(--attn-inputs "$tmp/$name-attn-inputs.safetensors")
  else
    omlx+=(--dtype float32)
  fi
  [ "$math" = mlx-cpu ] && "${omlx[@]}" --save-attn-inputs "$tmp/$name-attn-inputs.safetensors" --out "$tmp/$name-native.json" >/dev/null
  (cd "$root" && node_modules/.bin/tsx harness/mlx/product-blocks.ts --ckpt "$tmp/$preset" --sidecar "$tmp/$preset-$math" \
    --tokens "$fx/$tokens" --take "$take" --block-size "$bs" --model-name "$model_name" "${ours[@]}" --out "$tmp/$name")
  "${omlx[@]}" --ours "product=$tmp/$name/omlx-store" --out "$tmp/$name.json"
  records+=("$name" "$tmp/$name.json" "$tmp/$name/index.json")
  rm -rf "${blocks_out:?}/$name" "$blocks_out/$name-attn-inputs.safetensors"; mkdir -p "$blocks_out"; cp -r "$tmp/$name-omlx" "$blocks_out/$name"
  [ "$math" = mlx-cpu ] && cp "$tmp/$name-attn-inputs.safetensors" "$blocks_out/"
done
# the MLX commit build-mlx.sh exported (its marker file names the rev it was given)
mlx_rev="$(basename "$(ls "$here"/.work/src/mlx/.exported-* | head -1)" | sed 's/^\.exported-//')"
mlx_commit="$(git --git-dir="${MLX_GIT:-/work/.mirror/ml-explore+mlx/repo}" rev-parse "$mlx_rev")"
python3 - "$out" "$here/omlx-files.json" "$here/omlx-cache-files.json" "$mlx_commit" "${records[@]}" <<'PY'
import json, sys
out, model_files, cache_files, mlx_commit, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
commits = sorted({f"{f['repo']}@{f['commit']}" for m in (model_files, cache_files) for f in json.load(open(m))["files"]})
cases, mlx = [], None
for name, run_file, index_file in zip(rest[0::3], rest[1::3], rest[2::3]):
    run, index = json.load(open(run_file)), json.load(open(index_file))
    mlx = {"version": run["mlx"]["version"], "commit": mlx_commit}
    s = run["stores"]["product"]
    cases.append({"case": name, "checkpoint": run["checkpoint"], "prompt_tokens": run["tokens"], "cache_math": index["cache_math"], "profile": index["profile"],
                  "blocks_written": index["blocks_written"], "blocks_restored": s["blocks"], "logits_steps": s["logits_steps"],
                  "logits_steps_bit_identical": s["logits_bit_identical_steps"], "max_rel_err": s["logits_rel_error_max"],
                  "greedy_equal": s["greedy_equal"], "attention_inputs": index["attention_inputs"],
                  "omlx_own_store": run["stores"]["omlx"]})
json.dump({"producer": "harness/mlx/make-product-bridge-proof.sh", "mlx": mlx, "omlx": {"commits": commits}, "cases": cases}, open(out, "w"), indent=1)
open(out, "a").write("\n")
print(f"make-product-bridge-proof: {len(cases)} cases -> {out}")
PY
