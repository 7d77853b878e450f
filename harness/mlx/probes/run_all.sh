#!/bin/sh
# Runs every probe; each prints one line per claim with its bit-exact match rate.
cd "$(dirname "$0")"
export PYTHONPATH=/work/main/harness/mlx/.work/python
for p in probe_matmul.py probe_matmul_hard.py probe_elementwise.py probe_norm_reduce_softmax.py \
         probe_rope_sdpa.py probe_quant.py probe_topk_compile.py probe_cache_path.py; do
  echo "== $p"; python3 "$p" || echo "FAILED: $p"
done
