#!/usr/bin/env bash
# Pack what the CUDA machine lacks into .device-carry/ (ignored): Node itself (xz), the production
# node_modules without node-llama-cpp (the rung needs no llama.cpp) plus zx for the protocols, and
# the native addon built here (it loads there: research/real-engines.md). run.sh unpacks them.
# The whole tree that travels must stay under 64 MiB (docs/torch-rung.md).
#
#   bash protocols/cuda-rung/pack.sh
set -euo pipefail
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
  delete p.dependencies["node-llama-cpp"]; delete p.dependencies["node-addon-api"]
  p.dependencies.zx = p.devDependencies.zx; p.devDependencies = {}; delete p.scripts.install; delete p.gypfile
  fs.writeFileSync(process.argv[1] + "/package.json", JSON.stringify(p, null, 2))' "$work"
(cd "$work" && npm install --omit=dev --ignore-scripts --offline --no-audit --no-fund --loglevel=error >/dev/null)
tar -C "$work" -cJf "$carry/node_modules.tar.xz" node_modules
du -b "$carry"/* | awk '{ s += $1; print } END { printf "carry: %.1f MB\n", s / 1e6 }'
