#!/usr/bin/env bash
# Pack what the GPU host lacks for the load levels (run-device.sh) into .device-carry/ (ignored): the
# decoder-scaling carry (Node, production node_modules with node-llama-cpp's linux-x64 CPU binaries,
# zx, the addon, the commit: protocols/decoder-scaling/pack.sh) plus the official openai client the
# protocol's clients are (a devDependency, so not in that carry; it has no dependencies of its own).
# The whole tree that travels must stay under 64 MiB: move harness/fixtures aside for the call.
#
#   bash protocols/load/pack.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry="$repo/.device-carry"
bash "$repo/protocols/decoder-scaling/pack.sh"
[ -f "$repo/node_modules/openai/package.json" ] || { echo "pack: node_modules/openai is missing (npm ci)" >&2; exit 1; }
# Its JavaScript only: no sources, maps or type declarations.
tar -C "$repo" -cJf "$carry/openai.tar.xz" --exclude='*.map' --exclude='*.d.ts' --exclude='*.d.mts' --exclude='*.d.cts' --exclude='node_modules/openai/src' node_modules/openai
du -b "$carry"/* | awk '{ s += $1; print } END { printf "carry: %.1f MB\n", s / 1e6 }'
