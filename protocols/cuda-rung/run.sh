#!/usr/bin/env bash
# The CUDA rung on the GPU machine (issue #16; docs/torch-rung.md): transformers on the GPU as the
# prefill engine (src/engines/torch/serve_prefill.py), our decoder on its CPU cores, the front door
# and the share as usual. Run from the repository root after pack.sh, with the tree and
# .device-carry/ copied over; steps run in the order given, each under its own time limit:
#
#   bash protocols/cuda-rung/run.sh setup hook:16384 needle:2048,8192,16384 bench:4096,16384 [--out DIR]
#
#   setup            unpack Node, node_modules and the addon from .device-carry/
#   hook:T           GPU hook vs TypeScript hook on the attention inputs of a T-token transformers forward
#   needle:L,L,...   the needle protocol through the GPU bridge (preset needle), depths 0, 0.5, 1
#   bench:S,S,...    cold-bench, bridged vs decoder alone, one fresh seed per size (preset flash-attn)
#
# PD_TORCH_PYTHON (python3), PD_TORCH_DEVICE (cuda), PD_RUNG_PRESET (flash-attn, for hook and bench)
# and PD_RUNG_BUDGET_S (560: the steps' total) change the defaults; a CPU trial of the script runs
# with PD_TORCH_DEVICE=cpu PD_RUNG_PRESET=tiny and without the setup step.
#
# Records land in the checkout's results/ (runs, needle runs and ledger) and results/torch-hook/;
# at the end results/ is packed into OUT/results.tar.gz (OUT: --out or $OUT), with a log.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-$repo/.device-state/out}
steps=()
while [ $# -gt 0 ]; do
  case "$1" in --out) out=$2; shift 2 ;; *) steps+=("$1"); shift ;; esac
done
mkdir -p "$out" .device-state
state=$repo/.device-state/stack
python=${PD_TORCH_PYTHON:-python3}
device=${PD_TORCH_DEVICE:-cuda}
preset=${PD_RUNG_PRESET:-flash-attn}
export PATH=/tmp/pd-node/bin:$PATH
budget_s=${PD_RUNG_BUDGET_S:-560}
t_start=$(date +%s)
log() { echo "[rung $(date -u +%H:%M:%S) +$(( $(date +%s) - t_start ))s] $*"; }
left() { echo $(( budget_s - ($(date +%s) - t_start) )); }
# The stack's children are detached (their own process groups), so a step that runs out of time
# leaves them running when timeout kills the protocol: they then hold the cores and the GPU during
# the next step or call (seen on the H200: the next call's stack took 155 s to start). Reap them.
reap() {
  local pids
  pids=$(pgrep -f "serve_prefil[l]|$repo/src/" | grep -v "^$$\$" || true)
  [ -z "$pids" ] && return 0
  log "reaping $(echo "$pids" | wc -w) leftover stack processes"
  kill -TERM $pids 2>/dev/null; sleep 5; kill -KILL $pids 2>/dev/null || true
}
pack() {
  reap
  tar -czf "$out/results.tar.gz" results 2>/dev/null
  log "packed results/ into $out/results.tar.gz"
  # The stack's own logs (last 4,000 lines each): why a leg was slow or declined, for the next session.
  mkdir -p "$out/logs"
  find .device-state -path '*/logs/*.log' 2>/dev/null | while read -r f; do
    tail -n 4000 "$f" > "$out/logs/$(echo "${f#.device-state/}" | tr / _)"
  done
}
trap pack EXIT
reap
export PD_PROGRESS=off

for step in "${steps[@]}"; do
  name=${step%%:*}; arg=${step#*:}; [ "$arg" = "$step" ] && arg=
  limit=$(( $(left) - 15 ))
  if [ "$limit" -lt 30 ]; then log "skipping $step: ${limit}s left"; continue; fi
  log "step $step (limit ${limit}s)"
  case "$name" in
    setup)
      mkdir -p /tmp/pd-node/bin
      xz -dc .device-carry/node.xz > /tmp/pd-node/bin/node && chmod +x /tmp/pd-node/bin/node
      tar -xJf .device-carry/node_modules.tar.xz
      mkdir -p native/build/Release && cp .device-carry/pdb_kernels.node native/build/Release/
      log "node $(/tmp/pd-node/bin/node --version); $(nproc) cores; $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null)"
      "$python" -c 'import torch, transformers, aiohttp; print("torch", torch.__version__, "transformers", transformers.__version__, "aiohttp", aiohttp.__version__)'
      ;;
    hook)
      a=$(timeout "$limit" node node_modules/tsx/dist/cli.mjs protocols/cuda-rung/assets.ts --state-dir "$state" --preset "$preset") || { log "assets failed"; continue; }
      log "assets $a"
      model=$(echo "$a" | node -pe 'JSON.parse(require("fs").readFileSync(0)).model')
      sidecar=$(echo "$a" | node -pe 'JSON.parse(require("fs").readFileSync(0)).sidecar')
      d=.device-state/hook-$arg; rm -rf "$d"
      timeout "$(( $(left) - 15 ))" "$python" protocols/cuda-rung/hook_inputs.py --model "$model" --sidecar "$sidecar" --out "$d" --tokens "$arg" --device "$device" --dtype bf16 || { log "hook_inputs failed"; continue; }
      mkdir -p results/torch-hook
      timeout "$(( $(left) - 15 ))" node node_modules/tsx/dist/cli.mjs protocols/cuda-rung/hook-distance.ts --sidecar "$sidecar" --dir "$d" \
        --out "results/torch-hook/$(date -u +%Y-%m-%dT%H-%M-%SZ)-$preset-t$arg.json" | tail -4
      ;;
    needle)
      timeout "$limit" node protocols/needle.mjs --preset needle --prefill-engine torch --torch-python "$python" --torch-device "$device" \
        --lengths "$arg" --depths 0,0.5,1 --no-generate --state-dir "$state" 2>&1 | grep -v '^{"progress' | tail -25
      ;;
    bench)
      timeout "$limit" node protocols/cold-bench.mjs --preset "$preset" --prefill-engine torch --torch-python "$python" --torch-device "$device" \
        --sizes "$arg" --repeats 1 --max-tokens 32 --no-generate --state-dir "$state" 2>&1 | grep -v '^{"progress'
      ;;
    *) log "unknown step $step"; exit 2 ;;
  esac
  reap
done
