#!/usr/bin/env bash
# Builds native/tools/isa_driver.cc four ways and compares the SHA-256 of every output buffer:
#   x86-64 AVX-512 (-DPDB_ISA_AVX512 ..., run only where the CPU has it), x86-64 AVX2
#   (-DPDB_ISA_AVX2 -mavx2 -mf16c -mfma), x86-64 portable, aarch64 portable (run under qemu-user).
# Needs g++, and for the arm64 leg g++-aarch64-linux-gnu and qemu-user (Debian:
# apt-get install -y g++-aarch64-linux-gnu qemu-user); without them only the x86 legs run.
# The aarch64 leg also compiles every addon source (napi.h from node-addon-api) to arm64 objects, so
# a non-x86 build of the whole addon is checked for compile errors. Exit status 0 when all hashes agree.
#   native/tools/isa-crosscheck.sh [WORK_DIR]     (default: a new directory under /tmp)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-$(mktemp -d /tmp/pdb-isa-crosscheck.XXXXXX)}
mkdir -p "$WORK"
SRC="$ROOT/native/src"
ISA_SOURCES=(matmul rmsnorm peak_loops fmath_array attention indexer pool rope_rows round_bf16 isa_table)
FLAGS=(-std=c++17 -O3 -ffp-contract=off -fno-fast-math -I"$SRC" -pthread)
files=("$ROOT/native/tools/isa_driver.cc" "$SRC/parallel.cc" "$SRC/hc_post.cc")
for f in "${ISA_SOURCES[@]}"; do files+=("$SRC/$f.cc"); done

legs=()
build () {  # name compiler [flags...]
  local name=$1 cxx=$2
  shift 2
  echo "isa-crosscheck: building $name ($cxx $*)"
  "$cxx" "${FLAGS[@]}" "$@" "${files[@]}" -o "$WORK/driver-$name"
  legs+=("$name")
}
build x86-avx2 g++ -DPDB_ISA_AVX2 -DPDB_HAVE_AVX2 -mavx2 -mf16c -mfma
build x86-portable g++ -DPDB_ISA_PORTABLE
if grep -q avx512bw /proc/cpuinfo 2> /dev/null; then
  build x86-avx512 g++ -DPDB_ISA_AVX512 -DPDB_HAVE_AVX2 -mavx2 -mf16c -mfma -mavx512f -mavx512dq -mavx512bw -mavx512vl
else
  echo "isa-crosscheck: this CPU has no AVX-512: the x86-avx512 leg is skipped"
fi

run_leg () {  # name [runner...]
  local name=$1
  shift
  rm -rf "$WORK/out-$name"
  mkdir -p "$WORK/out-$name"
  "$@" "$WORK/driver-$name" "$WORK/out-$name"
  (cd "$WORK/out-$name" && sha256sum -- *.bin | sort -k2) > "$WORK/sha256-$name.txt"
}
run_leg x86-avx2
run_leg x86-portable
if [[ " ${legs[*]} " == *" x86-avx512 "* ]]; then run_leg x86-avx512; fi

if command -v aarch64-linux-gnu-g++ > /dev/null && command -v qemu-aarch64 > /dev/null; then
  build arm64-portable aarch64-linux-gnu-g++ -DPDB_ISA_PORTABLE
  run_leg arm64-portable qemu-aarch64 -L /usr/aarch64-linux-gnu
  # The rest of the addon (bindings, dispatch) compiles for arm64 too: objects only, no Node to link against.
  NAPI_INC=$(cd "$ROOT" && node -p "require('node-addon-api').include_dir" 2> /dev/null || true)
  NODE_INC=$(dirname "$(dirname "$(command -v node)")")/include/node
  if [[ -n "$NAPI_INC" && -f "$NODE_INC/node_api.h" ]]; then
    for f in addon dispatch parallel peak hc_post entry_fmath entry_attention entry_pool entry_rope entry_round entry_hc; do
      aarch64-linux-gnu-g++ "${FLAGS[@]}" -fPIC -DNAPI_VERSION=8 -DNODE_ADDON_API_DISABLE_CPP_EXCEPTIONS -I"$NAPI_INC" -I"$NODE_INC" \
        -c "$SRC/$f.cc" -o "$WORK/arm64-$f.o"
    done
    echo "isa-crosscheck: every addon source compiles for aarch64"
  fi
else
  echo "isa-crosscheck: no aarch64-linux-gnu-g++ or qemu-aarch64: the arm64 leg is skipped"
fi

status=0
ref=${legs[0]}
for leg in "${legs[@]:1}"; do
  if cmp -s "$WORK/sha256-$ref.txt" "$WORK/sha256-$leg.txt"; then
    echo "isa-crosscheck: $leg == $ref on all $(wc -l < "$WORK/sha256-$ref.txt") buffers"
  else
    echo "isa-crosscheck: $leg differs from $ref:"
    diff "$WORK/sha256-$ref.txt" "$WORK/sha256-$leg.txt" | head -20 || true
    status=1
  fi
done
echo "isa-crosscheck: combined $(cat "$WORK/sha256-$ref.txt" | sha256sum | cut -c1-16) ($ref), hashes in $WORK/sha256-*.txt"
exit $status
