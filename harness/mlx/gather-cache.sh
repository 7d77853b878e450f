#!/usr/bin/env bash
# Lays out oMLX's prefix-cache stack beside its DeepSeek-V4 model for harness/mlx/omlx_prefix_cache.py,
# in harness/mlx/.omlx/cache-site (ignored, never committed): a copy of the model site gather.sh makes,
# plus every file harness/mlx/omlx-cache-files.json names, each checked against its character count
# and SHA-256 before it is used:
#   "via": "index"  read from oMLX's public repository through the search index into
#                   harness/mlx/.omlx/snap/<path> (jundot/omlx cannot be fetched here);
#   "via": "git"    taken with `git show COMMIT:PATH` from a fetched git mirror holding that jundot
#                   commit (OMLX_GIT, default /work/.mirror/josefprusa+omlx/repo: a fork whose
#                   history is jundot/omlx's own up to v0.5.0).
# Run harness/mlx/gather.sh first.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
omlx="$here/.omlx"
site="$omlx/cache-site"
OMLX_GIT="${OMLX_GIT:-/work/.mirror/josefprusa+omlx/repo}"
PYTHON="${PYTHON:-python3}"
[ -d "$omlx/site" ] || { echo "gather-cache: run harness/mlx/gather.sh first" >&2; exit 1; }
rm -rf "$site"; cp -r "$omlx/site" "$site"
"$PYTHON" - "$here/omlx-cache-files.json" "$omlx/snap" "$site" "$OMLX_GIT" <<'PY'
import hashlib, json, os, subprocess, sys
manifest, snap, site, git_dir = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
for f in manifest["files"]:
    if f["via"] == "git":
        try:
            text = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{f['commit']}:{f['path']}"],
                                  check=True, capture_output=True).stdout.decode("utf-8")
        except Exception as e:
            sys.exit(f"gather-cache: {f['path']} at {f['commit'][:12]} is not in {git_dir} ({e})")
    else:
        src = os.path.join(snap, f["path"])
        if not os.path.exists(src):
            sys.exit(f"gather-cache: {src} is missing (read {f['repo']} {f['path']} at {f['commit'][:12]} into it)")
        text = open(src, encoding="utf-8", newline="").read()
    digest = hashlib.sha256(text.encode()).hexdigest()
    if len(text) != f["chars"] or digest != f["sha256"]:
        sys.exit(f"gather-cache: {f['path']} is not the file at {f['commit'][:12]} ({len(text)} chars, sha256 {digest[:12]}; manifest {f['chars']}, {f['sha256'][:12]})")
    out = os.path.join(site, f.get("site_path", f["path"]))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    open(out, "w", encoding="utf-8", newline="").write(text)
print(f"gather-cache: {len(manifest['files'])} oMLX cache files match the manifest; site at {site}")
PY
