#!/usr/bin/env bash
# Pack what the GPU host lacks for the decoder-scaling protocol into .device-carry/ (ignored), as
# protocols/cuda-rung/pack.sh does for the rung, plus llama.cpp: node-llama-cpp's JavaScript and its
# dependencies, and of its prebuilt binaries only the CPU package for linux-x64
# (@node-llama-cpp/linux-x64); no CUDA or Vulkan variants, no bundled llama.cpp sources
# (llama/gitRelease.bundle, llama/addon: build-time only; the protocol never builds). run.sh unpacks.
# The whole tree that travels must stay under 64 MiB: move harness/fixtures aside for the call.
#
#   [PD_SCALING_BASELINE=other/pdb_kernels.node] bash protocols/decoder-scaling/pack.sh
#
# PD_SCALING_BASELINE: a second build of the addon (e.g. main's, built in its own checkout) carried
# as baseline.node for run.sh's `addons` step.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry="$repo/.device-carry"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$carry"
cpu_pkg="$repo/node_modules/@node-llama-cpp/linux-x64"
[ -f "$repo/native/build/Release/pdb_kernels.node" ] || { echo "pack: build the addon first (npm ci or npm run build:native)" >&2; exit 1; }
[ -d "$cpu_pkg/bins" ] || { echo "pack: $cpu_pkg is missing (npm ci on linux-x64 installs it)" >&2; exit 1; }
cp "$repo/native/build/Release/pdb_kernels.node" "$carry/"
rm -f "$carry/baseline.node"
if [ -n "${PD_SCALING_BASELINE:-}" ]; then cp "$PD_SCALING_BASELINE" "$carry/baseline.node"; fi
(cd "$repo" && echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!harness/fixtures/mlx' || echo -dirty)") > "$carry/commit"
if [ ! -f "$carry/node.xz" ] || [ "$(command -v node)" -nt "$carry/node.xz" ]; then
  xz -T0 -6 -c "$(readlink -f "$(command -v node)")" > "$carry/node.xz"
fi
cp "$repo/package.json" "$repo/package-lock.json" "$work/"
# Production dependencies without their optional platform binaries and without the addon's
# build-time headers; tsx is one of them (the protocol's driver is TypeScript).
node -e '
  const fs = require("fs"); const p = JSON.parse(fs.readFileSync(process.argv[1] + "/package.json", "utf8"))
  delete p.dependencies["node-addon-api"]
  p.devDependencies = {}; delete p.scripts.install; delete p.gypfile
  fs.writeFileSync(process.argv[1] + "/package.json", JSON.stringify(p, null, 2))' "$work"
(cd "$work" && npm install --omit=dev --omit=optional --ignore-scripts --offline --no-audit --no-fund --loglevel=error >/dev/null)
# The two optional platform packages the protocol needs: tsx's esbuild and llama.cpp's CPU build.
mkdir -p "$work/node_modules/@node-llama-cpp" "$work/node_modules/@esbuild"
cp -a "$repo/node_modules/@esbuild/linux-x64" "$work/node_modules/@esbuild/linux-x64"
cp -a "$cpu_pkg" "$work/node_modules/@node-llama-cpp/linux-x64"
rm -rf "$work/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$work/node_modules/node-llama-cpp/llama/addon"
tar -C "$work" -cJf "$carry/node_modules.tar.xz" node_modules
du -b "$carry"/* | awk '{ s += $1; print } END { printf "carry: %.1f MB\n", s / 1e6 }'
