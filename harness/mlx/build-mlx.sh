#!/usr/bin/env bash
# Builds MLX's Python bindings (CPU backend only) into harness/mlx/.work/python (ignored), the MLX
# every harness/mlx proof script puts on PYTHONPATH. Everything comes from fetched git directories
# (no network at build time: each FetchContent dependency is pointed at a local export):
#   MLX_GIT       ml-explore/mlx, at MLX_REV (846d176 = 0.32.2)
#   NANOBIND_GIT  wjakob/nanobind v2.15.0, with its submodule ext/robin_map from ROBIN_MAP_GIT
#   JSON_GIT      nlohmann/json v3.11.3;  FMT_GIT  fmtlib/fmt 12.1.0 (the tags MLX's CMakeLists names)
# BLAS/LAPACK: the system's OpenBLAS + LAPACKE (Debian: libopenblas-dev liblapacke-dev).
# Flags: Release (-O3), no -march, no fast-math; the default FP contraction of the compiler is
# what MLX's own Linux wheels are built with, so nothing is added. Repeatable: a second run reuses
# .work/build and only relinks what changed. The machine is shared: nice and -j${JOBS:-2}.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$here/.work"
MLX_GIT="${MLX_GIT:-/work/.mirror/ml-explore+mlx/repo}"
MLX_REV="${MLX_REV:-846d176}"
NANOBIND_GIT="${NANOBIND_GIT:-/work/.mirror/wjakob+nanobind/repo}"
ROBIN_MAP_GIT="${ROBIN_MAP_GIT:-/work/.mirror/Tessil+robin-map/repo}"
JSON_GIT="${JSON_GIT:-/work/.mirror/nlohmann+json/repo}"
FMT_GIT="${FMT_GIT:-/work/.mirror/fmtlib+fmt/repo}"
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-2}"

for lib in cblas.h lapacke.h; do
  [ -e "/usr/include/$lib" ] || [ -e "/usr/include/x86_64-linux-gnu/$lib" ] || \
    { echo "build-mlx: /usr/include/$lib is missing (apt-get install libopenblas-dev liblapacke-dev)" >&2; exit 1; }
done

export_at() { # git dir, rev, destination: a clean tree of that commit, once
  local git="$1" rev="$2" dest="$3"
  if [ ! -f "$dest/.exported-$rev" ]; then
    rm -rf "$dest"; mkdir -p "$dest"
    git --git-dir="$git" archive "$rev" | tar -x -C "$dest"
    touch "$dest/.exported-$rev"
  fi
}
export_at "$MLX_GIT" "$MLX_REV" "$work/src/mlx"
export_at "$NANOBIND_GIT" v2.15.0 "$work/src/nanobind"
robin_rev="$(git --git-dir="$NANOBIND_GIT" ls-tree v2.15.0 ext/robin_map | awk '{print $3}')"
export_at "$ROBIN_MAP_GIT" "$robin_rev" "$work/src/nanobind/ext/robin_map"
export_at "$JSON_GIT" v3.11.3 "$work/src/json"
export_at "$FMT_GIT" 12.1.0 "$work/src/fmt"

out="$work/python/mlx"
mkdir -p "$out"
nice -n 10 cmake -S "$work/src/mlx" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v "$PYTHON")" \
  -DMLX_PYTHON_BINDINGS_OUTPUT_DIRECTORY="$out" \
  -DMLX_BUILD_PYTHON_BINDINGS=ON -DMLX_BUILD_PYTHON_STUBS=OFF \
  -DMLX_BUILD_METAL=OFF -DMLX_BUILD_CUDA=OFF -DMLX_BUILD_CPU=ON \
  -DMLX_BUILD_TESTS=OFF -DMLX_BUILD_EXAMPLES=OFF -DMLX_BUILD_BENCHMARKS=OFF \
  -DMLX_BUILD_GGUF=OFF -DMLX_USE_CCACHE=OFF -DBUILD_SHARED_LIBS=OFF \
  -DBLA_VENDOR=OpenBLAS \
  -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
  -DFETCHCONTENT_SOURCE_DIR_NANOBIND="$work/src/nanobind" \
  -DFETCHCONTENT_SOURCE_DIR_JSON="$work/src/json" \
  -DFETCHCONTENT_SOURCE_DIR_FMT="$work/src/fmt"
nice -n 10 cmake --build "$work/build" -j "$JOBS"
# the pure-Python half of the package beside the compiled core
(cd "$work/src/mlx/python/mlx" && tar -c --exclude='*.pyi' . ) | tar -x -C "$out"
PYTHONPATH="$work/python" "$PYTHON" -c 'import mlx.core as mx; print("build-mlx: mlx", mx.__version__, mx.default_device())'
