#!/usr/bin/env bash
# The exact commands that made harness/fixtures/ on a CUDA machine with transformers 5.17.
# Usage: harness/make-reference-fixtures.sh CHECKPOINT_DIR OUT_DIR
# CHECKPOINT_DIR is `pd-bridge make-checkpoint --preset tiny --seed 1 --out CHECKPOINT_DIR`, made beforehand
# (the CUDA machine has no Node); OUT_DIR receives the fixtures.
set -euo pipefail
ckpt=$1 out=$2
here=$(dirname "$0")
export PYTHONUNBUFFERED=1
python3 "$here/hf_reference.py" prove --model "$ckpt" --tokenizer-cases "$here/tokenizer-cases.json" --out "$out/checkpoint-proof.json" || echo "prove: not clean (see checkpoint-proof.json)"
python3 "$here/hf_reference.py" dump --model "$ckpt" --tokens "$here/fixtures/tokens-301.json" --dtype float32 --split 130 --greedy 12 --out "$out/ref-tiny-t301-f32.safetensors"
python3 "$here/hf_reference.py" dump --model "$ckpt" --tokens "$here/fixtures/tokens-301.json" --dtype bfloat16 --split 130 --greedy 12 --out "$out/ref-tiny-t301-bf16.safetensors"
python3 "$here/hf_reference.py" dump --model "$ckpt" --tokens "$here/fixtures/tokens-1100.json" --dtype float32 --split 1030 --greedy 12 --no-attn-inputs --out "$out/ref-tiny-t1100-f32.safetensors"
python3 "$here/hf_rope_probe.py" --out "$out/hf-rope-probe.json"
