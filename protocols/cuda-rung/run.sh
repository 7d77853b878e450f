#!/usr/bin/env bash
# The CUDA rung on the GPU machine (issue #16; docs/torch-rung.md): transformers on the GPU as the
# prefill engine (src/engines/torch/serve_prefill.py), our decoder on its CPU cores, the front door
# and the share as usual. Run from the repository root after pack.sh, with the tree and
# .device-carry/ copied over; steps run in the order given, each under its own time limit:
#
#   bash protocols/cuda-rung/run.sh setup hook:16384 needle:2048,8192,16384 bench:4096,16384 [--out DIR]
#
#   setup            unpack Node, node_modules and the addon from .device-carry/
#   assets           make the preset's checkpoint and sidecar in the stack's state directory,
#                    $PD_RUNG_STATE (default /tmp/pd-rung-state/stack): outside the checkout, which
#                    each call replaces (its ignored .device-state/ did not survive to the next call
#                    on the H200 lender; /tmp did), so a later call on the same warm machine finds
#                    them: ~150 s saved per call at flash-attn
#   hook:T           GPU hook vs TypeScript hook on the attention inputs of a T-token transformers forward
#   hook-mlx:T       the same with the mlx-cpu cache math (an mlx-cpu sidecar of the preset's checkpoint;
#                    MLX's CPU arithmetic on the GPU vs the TypeScript path; the record names the GPU)
#   downstream:T     transformers' attention inputs vs our decoder's on T seeded tokens, per layer, and
#                    what they do downstream: the GPU capture bridged into our cache vs our native one
#                    (arrays, then KL and top-1 agreement of 32 teacher-forced answer steps;
#                    downstream.ts); reuses hook:T's forward when it ran in this call
#   needle:L,L,...   the needle protocol through the GPU bridge (preset needle), depths 0, 0.5, 1
#   bench:S,S,...    cold-bench, bridged vs decoder alone, one fresh seed per size (preset flash-attn)
#   bridged:S,S,...  cold-bench's bridged leg alone (--bridged-only): sizes whose decoder-alone leg outlasts a call
#   alone:S,S,...    cold-bench's decoder-alone legs alone (--alone-only), left waiting in the state
#                    directory's legs/ (it outlives the call on a warm machine)
#   pair             the bridged legs of the waiting legs (--pair-apart): with alone, a pair whose two
#                    legs together outlast a call, as two calls on one warm machine and one commit
#   decoder:KIND     the decoder of the bench, bridged, alone and pair steps after it: ours (the
#                    default) or llama.cpp (an f32 GGUF on every core; transformers then runs f32, as
#                    llama.cpp's F32 cache needs f32 captures). llama.cpp needs node-llama-cpp in the carry.
#
# PD_TORCH_PYTHON (python3), PD_TORCH_DEVICE (cuda), PD_RUNG_PRESET (flash-attn, for hook and bench)
# and PD_RUNG_BUDGET_S (560: the steps' total) change the defaults; PD_RUNG_COLD_FLAGS (e.g.
# "--torch-max-chunk 2048") is added to bench and bridged steps' cold-bench; PD_RUNG_STREAM=1 adds --stream-blocks
# to bench, bridged and pair (blocks written while the engine runs); a CPU trial of the script runs
# with PD_TORCH_DEVICE=cpu PD_RUNG_PRESET=tiny and without the setup step.
#
# Records land in the checkout's results/ (runs, needle runs and ledger) and results/torch-hook/;
# at the end results/ is packed into OUT/results.tar.gz (OUT: --out or $OUT), with a log.
#
# Steps longer than one call (a 64K decoder-alone leg runs ~12 minutes; a call ends at 10):
#   bash protocols/cuda-rung/run.sh --detach setup bench:32768,65536   returns at once
#   bash protocols/cuda-rung/run.sh --wait 580                         then, call after call
# --detach copies the tree to $PD_RUNG_DIR (/tmp/pd-rung) and runs the steps there in a session of
# their own (the next call's fresh copy of the checkout cannot touch its records), with
# PD_RUNG_BUDGET_S (default 1600 when detached) for all of them; --wait S follows it for up to S
# seconds and copies its log, results and stack logs into $OUT every 20 s and when it ends, so a
# call cut short still brings back what exists. The machine must stay warm between the calls, and
# the lender must let processes outlive a call: the H200 lender here does not (2026-12-02: the
# detached run was terminated when the call that started it ended), so there a leg must fit one call.
# A pair whose legs fit one call each runs as two calls on the warm machine instead:
#   bash protocols/cuda-rung/run.sh setup alone:65536      the decoder-alone leg, left waiting
#   bash protocols/cuda-rung/run.sh setup pair             its bridged leg, and the paired record
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
rung_dir=${PD_RUNG_DIR:-/tmp/pd-rung}
# The stack's own logs under STATE_DIR (last 4,000 lines each) into DEST/logs: why a leg was slow or declined.
copy_stack_logs() {
  mkdir -p "$2/logs"
  find "$1" -path '*/logs/*.log' 2>/dev/null | while read -r f; do
    tail -n 4000 "$f" > "$2/logs/$(echo "${f#"$1"/}" | tr / _)"
  done
}
case "${1:-}" in
  --detach)
    shift
    if [ -f "$rung_dir/out/pid" ] && kill -0 "$(cat "$rung_dir/out/pid")" 2>/dev/null; then
      echo "run.sh --detach: a detached run is still going (pid $(cat "$rung_dir/out/pid")); follow it with --wait" >&2; exit 2
    fi
    rm -rf "$rung_dir"; mkdir -p "$rung_dir/out"
    cp -a "$repo" "$rung_dir/tree"
    PD_RUNG_BUDGET_S=${PD_RUNG_BUDGET_S:-1600} setsid nohup bash "$rung_dir/tree/protocols/cuda-rung/run.sh" --out "$rung_dir/out" "$@" \
      > "$rung_dir/out/rung.log" 2>&1 < /dev/null &
    echo $! > "$rung_dir/out/pid"
    echo "detached: pid $(cat "$rung_dir/out/pid"), steps $*, log $rung_dir/out/rung.log"
    exit 0 ;;
  --wait)
    seconds=${2:?run.sh --wait needs a number of seconds}
    dest=${OUT:?run.sh --wait copies into \$OUT}
    [ -f "$rung_dir/out/pid" ] || { echo "run.sh --wait: no detached run in $rung_dir" >&2; exit 2; }
    pid=$(cat "$rung_dir/out/pid")
    sync_out() {
      cp "$rung_dir/out/rung.log" "$dest/" 2>/dev/null
      if [ -f "$rung_dir/out/results.tar.gz" ]; then cp "$rung_dir/out/results.tar.gz" "$dest/"
      else tar -C "$rung_dir/tree" -czf "$dest/results.tar.gz" results 2>/dev/null; fi
      copy_stack_logs "$(dirname "${PD_RUNG_STATE:-/tmp/pd-rung-state/stack}")" "$dest"
    }
    kill -0 "$pid" 2>/dev/null || echo "run.sh --wait: the detached run (pid $pid) is not running; its last lines:"
    end=$(( $(date +%s) + seconds ))
    while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do
      sync_out; sleep 20
    done
    sleep 1; sync_out
    kill -0 "$pid" 2>/dev/null && echo "run.sh --wait: still running after ${seconds}s (pid $pid)" || echo "run.sh --wait: the detached run has ended"
    tail -n 40 "$rung_dir/out/rung.log"
    exit 0 ;;
esac
out=${OUT:-$repo/.device-state/out}
steps=()
while [ $# -gt 0 ]; do
  case "$1" in --out) out=$2; shift 2 ;; *) steps+=("$1"); shift ;; esac
done
mkdir -p "$out" .device-state
state=${PD_RUNG_STATE:-/tmp/pd-rung-state/stack}
python=${PD_TORCH_PYTHON:-python3}
device=${PD_TORCH_DEVICE:-cuda}
preset=${PD_RUNG_PRESET:-flash-attn}
export PATH=/tmp/pd-node/bin:$PATH
# The commit records name: pack.sh's (the lender's copy of the checkout carries the git metadata of
# the session's first commit, not the packed one: a 2026-12-04 record named 079c0db for b0e68b0).
if [ -f .device-carry/commit ]; then export PD_RUN_COMMIT=$(cat .device-carry/commit); fi
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
  copy_stack_logs "$(dirname "$state")" "$out"
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
    assets)
      a=$(timeout "$limit" node node_modules/tsx/dist/cli.mjs protocols/cuda-rung/assets.ts --state-dir "$state" --preset "$preset") || { log "assets failed"; continue; }
      log "assets $a"
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
    hook-mlx)
      a=$(timeout "$limit" node node_modules/tsx/dist/cli.mjs protocols/cuda-rung/assets.ts --state-dir "$state" --preset "$preset") || { log "assets failed"; continue; }
      model=$(echo "$a" | node -pe 'JSON.parse(require("fs").readFileSync(0)).model')
      sidecar=$(dirname "$state")/sidecar-mlx-cpu-$preset; d=.device-state/hook-mlx-$arg; rm -rf "$d" "$sidecar"
      timeout "$(( $(left) - 15 ))" node bin/pd-bridge.mjs export-weights --model "$model" --profile decoder --cache-math mlx-cpu --out "$sidecar" || { log "export-weights failed"; continue; }
      timeout "$(( $(left) - 15 ))" "$python" protocols/cuda-rung/hook_inputs.py --model "$model" --sidecar "$sidecar" --out "$d" --tokens "$arg" --device "$device" --dtype bf16 --cache-math mlx-cpu || { log "hook_inputs failed"; continue; }
      mkdir -p results/torch-hook
      gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
      timeout "$(( $(left) - 15 ))" node node_modules/tsx/dist/cli.mjs protocols/cuda-rung/hook-distance.ts --sidecar "$sidecar" --dir "$d" --gpu "${gpu:-$device}" \
        --out "results/torch-hook/$(date -u +%Y-%m-%dT%H-%M-%SZ)-$preset-t$arg-mlx-cpu.json" | tail -4
      ;;
    downstream)
      a=$(timeout "$limit" node node_modules/tsx/dist/cli.mjs protocols/cuda-rung/assets.ts --state-dir "$state" --preset "$preset") || { log "assets failed"; continue; }
      model=$(echo "$a" | node -pe 'JSON.parse(require("fs").readFileSync(0)).model')
      sidecar=$(echo "$a" | node -pe 'JSON.parse(require("fs").readFileSync(0)).sidecar')
      d=.device-state/hook-$arg
      if [ ! -f "$d/attn-inputs.safetensors" ]; then
        rm -rf "$d"
        timeout "$(( $(left) - 15 ))" "$python" protocols/cuda-rung/hook_inputs.py --model "$model" --sidecar "$sidecar" --out "$d" --tokens "$arg" --device "$device" --dtype bf16 || { log "hook_inputs failed"; continue; }
      fi
      mkdir -p results/torch-hook
      gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
      timeout "$(( $(left) - 15 ))" node node_modules/tsx/dist/cli.mjs protocols/cuda-rung/downstream.ts --model "$model" --sidecar "$sidecar" --dir "$d" \
        --gpu "${gpu:-none}" --out "results/torch-hook/$(date -u +%Y-%m-%dT%H-%M-%SZ)-$preset-t$arg-downstream.json" | tail -4
      ;;
    needle)
      timeout "$limit" node protocols/needle.mjs --preset needle --prefill-engine torch --torch-python "$python" --torch-device "$device" \
        --lengths "$arg" --depths 0,0.5,1 --no-generate --state-dir "$state" 2>&1 | grep -v '^{"progress' | tail -25
      ;;
    decoder)
      case "$arg" in ours|llama.cpp) rung_decoder=$arg; log "decoder: $arg for the steps after this one" ;; *) log "decoder:$arg: expected ours or llama.cpp"; exit 2 ;; esac
      ;;
    bench|bridged|alone|pair)
      # bridged: the bridged leg alone (records with native: null), for sizes whose decoder-alone leg outlasts a call;
      # alone then pair: both legs, in two calls (the pair takes sizes, seeds and budget from the waiting legs)
      case "$name" in
        bench) legs=(--sizes "$arg" --repeats 1 --max-tokens 32 --stop-unless-complete) ;;
        bridged) legs=(--sizes "$arg" --repeats 1 --max-tokens 32 --bridged-only) ;;
        alone) legs=(--sizes "$arg" --repeats 1 --max-tokens 32 --alone-only) ;;
        pair) legs=(--pair-apart) ;;
      esac
      kind=()
      [ "${rung_decoder:-ours}" = llama.cpp ] && kind=(--decoder llama.cpp --torch-dtype f32)
      [ "${PD_RUNG_STREAM:-0}" = 1 ] && [ "$name" != alone ] && kind+=(--stream-blocks)
      timeout "$limit" node protocols/cold-bench.mjs --preset "$preset" --prefill-engine torch --torch-python "$python" --torch-device "$device" \
        "${kind[@]}" "${legs[@]}" --no-generate --state-dir "$state" ${PD_RUNG_COLD_FLAGS:-} 2>&1 | grep -v '^{"progress'
      [ "$name" = alone ] && find "$state/legs" -maxdepth 1 -name '*.json' -exec cp {} "$out/" \; 2>/dev/null
      ;;
    *) log "unknown step $step"; exit 2 ;;
  esac
  reap
done
