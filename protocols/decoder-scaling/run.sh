#!/usr/bin/env bash
# Our decoder against llama.cpp on the GPU host's CPU cores (issue #44 item 2; docs/BENCHMARK-PROTOCOL.md,
# "Decoder scaling"). Run from the repository root after protocols/decoder-scaling/pack.sh, with the
# tree (harness/fixtures set aside: 64 MiB cap) and .device-carry/ copied over; steps run in order,
# each under what is left of the budget:
#
#   bash protocols/decoder-scaling/run.sh setup assets bench:512 [--out DIR]
#
#   setup             unpack Node, node_modules (node-llama-cpp's CPU build included) and the addon
#   assets            make the preset's checkpoint and its bf16 and f32 GGUFs in $PD_SCALING_STATE
#                     (default /tmp/pd-scaling-state: outside the checkout, so a later call on the
#                     same warm machine reuses them)
#   bench:S,S[@T,T]   prompt sizes S at threads T (default 2,16): ours (worker pool), ours without the
#                     pool, llama.cpp bf16 and llama.cpp f32, two runs each, alternating
#                     (protocols/decoder-scaling/bench.ts; PD_SCALING_LEGS picks other legs)
#   long:S[@T]        the same for long prompts, ours and llama.cpp bf16 only (default threads 16)
#   batch[:L][@T]     where a batched decode step goes (protocols/batch-step.ts): batches L (default
#                     1,2,4,8) of 64-token sequences on our engine, at each thread count T (default 2,16);
#                     PD_SCALING_BATCH_FLAGS adds batch-step.ts flags (e.g. --compare-exact-fma)
#   addons[@T]        pack.sh's baseline addon (PD_SCALING_BASELINE at pack time) against this tree's,
#                     kernel by kernel, and each kernel's share of a 1,024-token prefill
#                     (protocols/bench-addons.ts), at threads T (default 2,16)
#   matmulab[@T]      the bf16 matmul of the baseline addon against this tree's at the model's decode
#                     shapes (m = 1..16), 24 weight matrices per shape so W streams from memory
#                     (protocols/bench-matmul-cpu.ts --compare baseline), at threads T (default 1,2,4,8,16)
#   batchab[:L][@T]   `batch` with the baseline tree (PD_SCALING_BASELINE_COMMIT at pack time: its
#                     TypeScript and addon) and this tree, PD_SCALING_AB_ROUNDS (3) rounds of the two
#                     legs alternating, each leg its own process; default threads 16
#
# PD_SCALING_PRESET (flash-attn), PD_SCALING_RUNS (2), PD_SCALING_DECODE (32 completion tokens),
# PD_SCALING_ASSET_LEGS (the legs whose assets `assets` makes: ours,llama.cpp:bf16,llama.cpp:f32; ours
# alone makes only the checkpoint) and PD_SCALING_BUDGET_S (540: all steps together) change the defaults. Records land in
# results/decoder-scaling/ (batch: results/batch/, addons: results/kernels-compare/); at the end those are packed into OUT/results.tar.gz
# (OUT: --out or $OUT) with each step's output in the log.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-$repo/.device-state/out}
steps=()
while [ $# -gt 0 ]; do
  case "$1" in --out) out=$2; shift 2 ;; *) steps+=("$1"); shift ;; esac
done
mkdir -p "$out" results/decoder-scaling results/batch results/kernels-compare
state=${PD_SCALING_STATE:-/tmp/pd-scaling-state}
preset=${PD_SCALING_PRESET:-flash-attn}
runs=${PD_SCALING_RUNS:-2}
decode=${PD_SCALING_DECODE:-32}
budget_s=${PD_SCALING_BUDGET_S:-540}
export PATH=/tmp/pd-node/bin:$PATH
if [ -f .device-carry/commit ]; then export PD_RUN_COMMIT=$(cat .device-carry/commit); fi
t_start=$(date +%s)
log() { echo "[scaling $(date -u +%H:%M:%S) +$(( $(date +%s) - t_start ))s] $*"; }
left() { echo $(( budget_s - ($(date +%s) - t_start) )); }
host_label() {
  local cpu gpu
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  echo "${gpu:-no GPU} host, $(nproc) cores ($cpu)"
}
pack() {
  tar -czf "$out/results.tar.gz" results/decoder-scaling results/batch results/kernels-compare 2>/dev/null
  log "packed results/decoder-scaling, results/batch and results/kernels-compare into $out/results.tar.gz"
}
trap pack EXIT
tsx() { node node_modules/tsx/dist/cli.mjs "$@"; }

for step in "${steps[@]}"; do
  name=${step%%:*}; arg=${step#*:}; [ "$arg" = "$step" ] && arg=
  limit=$(( $(left) - 10 ))
  if [ "$limit" -lt 30 ]; then log "skipping $step: ${limit}s left"; continue; fi
  log "step $step (limit ${limit}s)"
  case "$name" in
    setup)
      mkdir -p /tmp/pd-node/bin
      xz -dc .device-carry/node.xz > /tmp/pd-node/bin/node && chmod +x /tmp/pd-node/bin/node
      tar -xJf .device-carry/node_modules.tar.xz
      if [ -f .device-carry/tinybench.tar.xz ]; then tar -xJf .device-carry/tinybench.tar.xz; else log "setup: no .device-carry/tinybench.tar.xz (pack.sh makes it): matmulab cannot run"; fi
      mkdir -p native/build/Release && cp .device-carry/pdb_kernels.node native/build/Release/
      log "node $(node --version); $(host_label)"
      ;;
    assets)
      timeout "$limit" node node_modules/tsx/dist/cli.mjs protocols/decoder-scaling/bench.ts --prepare --state-dir "$state" --preset "$preset" \
        --legs "${PD_SCALING_ASSET_LEGS:-ours,llama.cpp:bf16,llama.cpp:f32}" || log "assets failed or ran out of time"
      ;;
    bench|long)
      sizes=${arg%%@*}; threads=${arg#*@}; [ "$threads" = "$arg" ] && threads=
      if [ "$name" = bench ]; then legs=${PD_SCALING_LEGS:-ours,ours:no-pool,llama.cpp:bf16,llama.cpp:f32}; threads=${threads:-2,16}
      else legs=${PD_SCALING_LEGS:-ours,llama.cpp:bf16}; threads=${threads:-16}; fi
      timeout "$limit" node node_modules/tsx/dist/cli.mjs protocols/decoder-scaling/bench.ts --state-dir "$state" --preset "$preset" \
        --sizes "$sizes" --threads "$threads" --legs "$legs" --runs "$runs" --decode "$decode" --label "$(host_label)" \
        || log "bench $arg failed or ran out of time (the record keeps what was measured)"
      ;;
    batch)
      levels=${arg%%@*}; threads=${arg#*@}; [ "$threads" = "$arg" ] && threads=
      [ -z "$levels" ] && levels=1,2,4,8
      for t in $(echo "${threads:-2,16}" | tr , ' '); do
        timeout "$(( $(left) - 10 ))" node node_modules/tsx/dist/cli.mjs protocols/batch-step.ts --model "$state/models/$preset-seed1" \
          --levels "$levels" --threads "$t" --note "$(host_label)" ${PD_SCALING_BATCH_FLAGS:-} || log "batch at $t threads failed or ran out of time"
      done
      ;;
    addons)
      threads=${arg:-2,16}
      [ -f .device-carry/baseline.node ] || { log "addons: no .device-carry/baseline.node (set PD_SCALING_BASELINE for pack.sh)"; continue; }
      timeout "$limit" node node_modules/tsx/dist/cli.mjs protocols/bench-addons.ts --baseline .device-carry/baseline.node \
        --model "$state/models/$preset-seed1" --threads "$threads" --tokens 1024 --note "$(host_label)" || log "addons failed or ran out of time"
      ;;
    matmulab)
      threads=${arg:-1,2,4,8,16}
      [ -f .device-carry/baseline.node ] || { log "matmulab: no .device-carry/baseline.node (set PD_SCALING_BASELINE for pack.sh)"; continue; }
      timeout "$limit" node node_modules/tsx/dist/cli.mjs protocols/bench-matmul-cpu.ts --compare baseline \
        --baseline .device-carry/baseline.node --distinct 24 --calls 16 --threads "$threads" --note "$(host_label)" \
        --shapes 1:4096:1024,2:4096:1024,4:4096:1024,8:4096:1024,16:4096:1024,1:1024:4096,8:1024:4096,2:4096:2048,3:4096:2048 \
        || log "matmulab failed or ran out of time"
      ;;
    batchab)
      levels=${arg%%@*}; threads=${arg#*@}; [ "$threads" = "$arg" ] && threads=
      [ -z "$levels" ] && levels=1,2,4,8
      [ -f .device-carry/baseline-tree.tar.xz ] || { log "batchab: no baseline tree (set PD_SCALING_BASELINE_COMMIT for pack.sh)"; continue; }
      base=/tmp/pd-baseline-tree; rm -rf "$base"; mkdir -p "$base/native/build/Release"
      tar -C "$base" -xJf .device-carry/baseline-tree.tar.xz
      ln -s "$repo/node_modules" "$base/node_modules"
      cp .device-carry/baseline.node "$base/native/build/Release/pdb_kernels.node"
      base_commit=$(cat .device-carry/baseline-commit)
      for round in $(seq 1 "${PD_SCALING_AB_ROUNDS:-3}"); do
        for t in $(echo "${threads:-16}" | tr , ' '); do
          (cd "$base" && PD_RUN_COMMIT=$base_commit timeout "$(( $(left) - 10 ))" node node_modules/tsx/dist/cli.mjs protocols/batch-step.ts \
            --model "$state/models/$preset-seed1" --levels "$levels" --threads "$t" --out "$repo/results/batch" \
            --note "$(host_label); batchab round $round: baseline ${base_commit:0:7}") || log "batchab baseline at $t threads failed or ran out of time"
          timeout "$(( $(left) - 10 ))" node node_modules/tsx/dist/cli.mjs protocols/batch-step.ts --model "$state/models/$preset-seed1" \
            --levels "$levels" --threads "$t" --note "$(host_label); batchab round $round: this tree ${PD_RUN_COMMIT:0:7}" \
            || log "batchab this tree at $t threads failed or ran out of time"
        done
      done
      ;;
    *) log "unknown step $step"; exit 2 ;;
  esac
done
