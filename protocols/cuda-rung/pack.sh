#!/usr/bin/env bash
# Pack what the CUDA machine lacks into .device-carry/ (ignored): Node itself (xz), the production
# node_modules without node-llama-cpp (the rung needs no llama.cpp) plus zx for the protocols, and
# the native addon built here (it loads there: research/real-engines.md). run.sh unpacks them.
# The whole tree that travels must stay under 64 MiB (docs/torch-rung.md).
#
#   bash protocols/cuda-rung/pack.sh                  the rung with our decoder
#   bash protocols/cuda-rung/pack.sh --with-llama-cpp  also llama.cpp as a decoder (run.sh's decoder:llama.cpp):
#        node-llama-cpp's JavaScript and its linux-x64 CPU binaries only (no CUDA, Vulkan or other
#        platforms' binaries, no bundled llama.cpp sources): about 10 MB more, compressed
set -euo pipefail
with_llama=0
case "${1:-}" in --with-llama-cpp) with_llama=1 ;; '') ;; *) echo "pack: unknown argument $1 (--with-llama-cpp or nothing)" >&2; exit 2 ;; esac
repo=$(cd "$(dirname "$0")/../.." && pwd)
carry="$repo/.device-carry"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$carry"
[ -f "$repo/native/build/Release/pdb_kernels.node" ] || { echo "pack: build the addon first (npm ci or npm run build:native)" >&2; exit 1; }
cp "$repo/native/build/Release/pdb_kernels.node" "$carry/"
# The commit the packed tree is (-dirty with uncommitted changes): run.sh hands it to the records.
(cd "$repo" && echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!harness/fixtures/mlx' || echo -dirty)") > "$carry/commit"
if [ ! -f "$carry/node.xz" ] || [ "$(command -v node)" -nt "$carry/node.xz" ]; then
  xz -T0 -6 -c "$(readlink -f "$(command -v node)")" > "$carry/node.xz"
fi
cp "$repo/package.json" "$repo/package-lock.json" "$work/"
# Production dependencies only, without llama.cpp's 725 MB and the addon's build-time headers; zx for the protocols.
node -e '
  const fs = require("fs"); const p = JSON.parse(fs.readFileSync(process.argv[1] + "/package.json", "utf8"))
  if (process.argv[2] !== "1") delete p.dependencies["node-llama-cpp"]
  delete p.dependencies["node-addon-api"]
  p.dependencies.zx = p.devDependencies.zx; p.devDependencies = {}; delete p.scripts.install; delete p.gypfile
  fs.writeFileSync(process.argv[1] + "/package.json", JSON.stringify(p, null, 2))' "$work" "$with_llama"
(cd "$work" && npm install --omit=dev --ignore-scripts --offline --no-audit --no-fund --loglevel=error >/dev/null)
if [ "$with_llama" = 1 ]; then
  # The CPU binaries of this platform only, and no sources: a prebuilt binary is all the decoder loads.
  find "$work/node_modules/@node-llama-cpp" -mindepth 1 -maxdepth 1 ! -name linux-x64 -exec rm -rf {} +
  rm -f "$work/node_modules/node-llama-cpp/llama/gitRelease.bundle"
  [ -d "$work/node_modules/@node-llama-cpp/linux-x64" ] || { echo "pack: node-llama-cpp's linux-x64 binaries did not install" >&2; exit 1; }
fi
tar -C "$work" -cJf "$carry/node_modules.tar.xz" node_modules
du -b "$carry"/* | awk '{ s += $1; print } END { printf "carry: %.1f MB\n", s / 1e6 }'
