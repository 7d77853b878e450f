#!/usr/bin/env bash
# Issue 41's load levels on the GPU host's CPU cores (docs/BENCHMARK-PROTOCOL.md, "Load: concurrency
# levels"): protocols/load.mjs on a preset whose decode reads its weights (flash-attn, about 1.8 GB),
# decode-heavy, every answer checked against its solo run. Run from the repository root after
# protocols/load/pack.sh, with the tree (harness/fixtures set aside: 64 MiB cap) and .device-carry/
# copied over; steps run in order, each under what is left of the budget:
#
#   bash protocols/load/run-device.sh setup assets levels [--out DIR]
#
#   setup    unpack Node, node_modules, the addon (protocols/decoder-scaling/run.sh setup) and openai
#   assets   make the preset's checkpoint and sidecar (and the GGUF for llama.cpp) in $PD_LOAD_STATE
#            (default /tmp/pd-load-state: outside the checkout, so a later call on the same warm
#            machine reuses them) by a one-request run of the protocol whose record is thrown away
#   levels   the load levels: --preset, --mix decode-heavy, 32-token short prompts, 64-token answers,
#            the latency probe under a 2048-token bridge; one record per decoder kind in results/load/levels/
#
# PD_LOAD_PRESET (flash-attn), PD_LOAD_DECODERS (ours; ours,llama.cpp for both), PD_LOAD_LEVELS
# (1,2,4,8,16), PD_LOAD_MAX_TOKENS (64), PD_LOAD_REQUESTS (requests per client, 1), PD_LOAD_SEED (41)
# and PD_LOAD_BUDGET_S (500: all steps together) change the defaults. At the end results/load/levels
# is packed into OUT/results.tar.gz (OUT: --out or $OUT); each step's output is in the log.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-$repo/.device-state/out}
steps=()
while [ $# -gt 0 ]; do
  case "$1" in --out) out=$2; shift 2 ;; *) steps+=("$1"); shift ;; esac
done
[ ${#steps[@]} -gt 0 ] || steps=(setup assets levels)
mkdir -p "$out" results/load/levels
state=${PD_LOAD_STATE:-/tmp/pd-load-state}
preset=${PD_LOAD_PRESET:-flash-attn}
decoders=${PD_LOAD_DECODERS:-ours}
levels=${PD_LOAD_LEVELS:-1,2,4,8,16}
max_tokens=${PD_LOAD_MAX_TOKENS:-64}
requests=${PD_LOAD_REQUESTS:-1}
seed=${PD_LOAD_SEED:-41}
budget_s=${PD_LOAD_BUDGET_S:-500}
export PATH=/tmp/pd-node/bin:$PATH PD_PROGRESS=off
if [ -f .device-carry/commit ]; then export PD_RUN_COMMIT=$(cat .device-carry/commit); fi
t_start=$(date +%s)
log() { echo "[load $(date -u +%H:%M:%S) +$(( $(date +%s) - t_start ))s] $*"; }
left() { echo $(( budget_s - ($(date +%s) - t_start) )); }
pack() {
  tar -czf "$out/results.tar.gz" results/load/levels 2>/dev/null
  log "packed results/load/levels into $out/results.tar.gz"
}
trap pack EXIT

for step in "${steps[@]}"; do
  limit=$(( $(left) - 10 ))
  if [ "$limit" -lt 30 ]; then log "skipping $step: ${limit}s left"; continue; fi
  log "step $step (limit ${limit}s)"
  case "$step" in
    setup)
      bash protocols/decoder-scaling/run.sh setup --out "$(mktemp -d)"
      tar -xJf .device-carry/openai.tar.xz
      log "node $(node --version); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
      ;;
    assets)
      timeout "$limit" node protocols/load.mjs --preset "$preset" --decoders "$decoders" --levels 1 --mix 0,0,1 --short-tokens 32 --max-tokens 1 \
        --latency-samples 0 --state-dir "$state" --runs "$(mktemp -d)" --no-generate --seed "$seed" || log "assets failed or ran out of time"
      ;;
    levels)
      log "load average $(cut -d' ' -f1-3 /proc/loadavg)"
      timeout "$limit" node protocols/load.mjs --preset "$preset" --decoders "$decoders" --levels "$levels" --mix decode-heavy --short-tokens 32 \
        --max-tokens "$max_tokens" --requests-per-client "$requests" --long-tokens 2048 --latency-samples 4 --seed "$seed" --state-dir "$state" --no-generate \
        || log "levels failed or ran out of time (a kind's record is written when its levels and probe end)"
      log "load average $(cut -d' ' -f1-3 /proc/loadavg)"
      ;;
    *) log "unknown step $step"; exit 2 ;;
  esac
done
