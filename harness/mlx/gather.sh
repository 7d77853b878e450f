#!/usr/bin/env bash
# Lays out the reference engine's Python sources in harness/mlx/.omlx/site (ignored, never committed):
#   mlx_lm/            upstream mlx-lm exported from a fetched git directory (MLX_LM_GIT, MLX_LM_REV)
#   omlx/...           oMLX's files, then our stubs (harness/mlx/stubs) for the two kernel modules
#                      switch_layers imports that have no CPU implementation
# harness/mlx/omlx_install.py then installs the model into mlx_lm at import time, as oMLX's patch does.
# oMLX's files are read from harness/mlx/.omlx/omlx/ (gathered from oMLX's public repository at the
# commits harness/mlx/omlx-files.json names; with network, from raw.githubusercontent.com) and each
# is checked against the manifest's character count and SHA-256 before it is used.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
omlx="$here/.omlx"
site="$omlx/site"
MLX_LM_GIT="${MLX_LM_GIT:-/work/.mirror/ml-explore+mlx-lm/repo}"
MLX_LM_REV="${MLX_LM_REV:-d78bf58e}"
PYTHON="${PYTHON:-python3}"

"$PYTHON" - "$here/omlx-files.json" "$omlx" <<'PY'
import hashlib, json, os, sys, urllib.request
manifest, root = json.load(open(sys.argv[1])), sys.argv[2]
for f in manifest["files"]:
    path = os.path.join(root, f["path"])
    if not os.path.exists(path):
        url = f"https://raw.githubusercontent.com/{f['repo']}/{f['commit']}/{f['path']}"
        try:
            data = urllib.request.urlopen(url, timeout=30).read()
        except Exception as e:
            sys.exit(f"gather: {f['path']} is missing and {url} could not be read ({e})")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").write(data)
    text = open(path, encoding="utf-8").read()
    digest = hashlib.sha256(text.encode()).hexdigest()
    if len(text) != f["chars"] or digest != f["sha256"]:
        sys.exit(f"gather: {f['path']} is not oMLX's file at {f['commit'][:12]} ({len(text)} chars, sha256 {digest[:12]}; manifest {f['chars']}, {f['sha256'][:12]})")
print(f"gather: {len(manifest['files'])} oMLX files match the manifest")
PY

rm -rf "$site"; mkdir -p "$site"
git --git-dir="$MLX_LM_GIT" archive "$MLX_LM_REV" mlx_lm | tar -x -C "$site"
mlx_lm_commit="$(git --git-dir="$MLX_LM_GIT" rev-parse "$MLX_LM_REV")"
# only the manifest's files: whatever else lies in .omlx/omlx is not part of this reference
"$PYTHON" - "$here/omlx-files.json" "$omlx" "$site" <<'PY'
import json, os, shutil, sys
for f in json.load(open(sys.argv[1]))["files"]:
    os.makedirs(os.path.dirname(os.path.join(sys.argv[3], f["path"])), exist_ok=True)
    shutil.copyfile(os.path.join(sys.argv[2], f["path"]), os.path.join(sys.argv[3], f["path"]))
PY
cp -r "$here/stubs/omlx/." "$site/omlx/"
printf '{"mlx_lm": {"version": "%s", "commit": "%s"}}\n' \
  "$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$site/mlx_lm/_version.py")" "$mlx_lm_commit" > "$site/sources.json"
echo "gather: site ready at $site (mlx-lm $mlx_lm_commit)"
