#!/usr/bin/env bash
# The oMLX-side adapter's test (harness/mlx/test_omlx_adapter.py) on oMLX's own cache stack.
# Needs MLX's Python bindings (harness/mlx/build-mlx.sh) and the oMLX sites (gather.sh, gather-cache.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ -d "$here/.work/python/mlx" ] || { echo "test-omlx-adapter: run harness/mlx/build-mlx.sh first" >&2; exit 1; }
[ -d "$here/.omlx/cache-site" ] || { echo "test-omlx-adapter: run harness/mlx/gather.sh and gather-cache.sh first" >&2; exit 1; }
export PYTHONPATH="$here/.work/python:$here/.omlx/cache-site${PYTHONPATH:+:$PYTHONPATH}"
exec python3 "$here/test_omlx_adapter.py"
