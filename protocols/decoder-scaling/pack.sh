#!/usr/bin/env bash
# Pack what the GPU host lacks for the decoder-scaling protocol into .device-carry/ (ignored): the
# rung's carry with llama.cpp (protocols/cuda-rung/pack.sh --with-llama-cpp: Node, the production
# node_modules with node-llama-cpp's linux-x64 CPU binaries only, the addon, the commit), tinybench
# (tinybench.tar.xz, for matmulab), plus an optional baseline addon for run.sh's `addons` step. The
# whole tree that travels must stay under 64 MiB: move harness/fixtures aside for the call.
#
#   [PD_SCALING_BASELINE=other/pdb_kernels.node] bash protocols/decoder-scaling/pack.sh
#
# PD_SCALING_BASELINE: a second build of the addon (e.g. main's, built in its own checkout) carried
# as baseline.node for run.sh's `addons`, `matmulab` and `batchab` steps.
# PD_SCALING_BASELINE_COMMIT: the commit that addon was built from; its TypeScript (src, protocols,
# verify, package.json, tsconfig.json) travels as baseline-tree.tar.xz with baseline-commit, so `batchab`
# runs the whole baseline, not only its addon, against this tree.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry="$repo/.device-carry"
bash "$repo/protocols/cuda-rung/pack.sh" --with-llama-cpp
# tinybench (a devDependency, so not in the production node_modules): bench-matmul-cpu.ts, run.sh's
# matmulab, reads its timing helpers through protocols/lib/bench-timing.ts.
[ -f "$repo/node_modules/tinybench/package.json" ] || { echo "pack: node_modules/tinybench is missing (npm ci)" >&2; exit 1; }
tar -C "$repo" -cJf "$carry/tinybench.tar.xz" node_modules/tinybench
rm -f "$carry/baseline.node" "$carry/baseline-tree.tar.xz" "$carry/baseline-commit"
if [ -n "${PD_SCALING_BASELINE:-}" ]; then
  cp "$PD_SCALING_BASELINE" "$carry/baseline.node"
  du -b "$carry/baseline.node"
fi
if [ -n "${PD_SCALING_BASELINE_COMMIT:-}" ]; then
  [ -n "${PD_SCALING_BASELINE:-}" ] || { echo "pack: PD_SCALING_BASELINE_COMMIT needs PD_SCALING_BASELINE (its addon)" >&2; exit 1; }
  git -C "$repo" rev-parse --verify --quiet "$PD_SCALING_BASELINE_COMMIT^{commit}" > "$carry/baseline-commit" \
    || { echo "pack: $PD_SCALING_BASELINE_COMMIT is not a commit" >&2; exit 1; }
  git -C "$repo" archive --format=tar "$PD_SCALING_BASELINE_COMMIT" src protocols verify package.json tsconfig.json | xz -9 > "$carry/baseline-tree.tar.xz"
  du -b "$carry/baseline-tree.tar.xz"
fi
