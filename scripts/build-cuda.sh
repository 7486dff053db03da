#!/usr/bin/env bash
# Builds the CUDA release binary here (no GPU needed) for the H200 device machine, following
# ../shared/gpu/README.md. Commits no third-party code: nvcc comes from PyPI wheels into an
# ignored venv, and candle-core is copied out of the cargo registry into an ignored folder
# with one feature changed (cudarc's dynamic-loading instead of dynamic-linking, since no
# libcuda/cuBLAS exist here to link against), then patched in for this build only.
#
#   scripts/build-cuda.sh            -> target/cuda/streamrag-cuda.tar.gz (binary + libcudart:
#                                       ~71 MB, 20 MB gzipped, under the device tool's 64 MiB)
# First build: ~15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
VENV=$ROOT/.cuda-venv
if [ ! -x "$VENV/bin/nvcc-ok" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
  touch "$VENV/bin/nvcc-ok"
fi
CU=$(ls -d "$VENV"/lib/python3*/site-packages/nvidia/cu13)
LINK=$ROOT/target/cuda/link
mkdir -p "$LINK"
ln -sf "$CU/lib/libcudart.so.13" "$LINK/libcudart.so"

# candle-core with cudarc's dynamic-loading, from the registry copy cargo already fetched
cargo fetch --quiet
VER=$(cargo metadata --format-version 1 | "$PY" -c "import json,sys; print([p['version'] for p in json.load(sys.stdin)['packages'] if p['name']=='candle-core'][0])")
SRC=$(ls -d "$HOME"/.cargo/registry/src/*/candle-core-"$VER" | head -1)
PATCHED=$ROOT/target/cuda/candle-core-$VER
if [ ! -d "$PATCHED" ]; then
  cp -r "$SRC" "$PATCHED"
  sed -i 's/"dynamic-linking"/"dynamic-loading"/g' "$PATCHED/Cargo.toml"
  grep -q '"dynamic-loading"' "$PATCHED/Cargo.toml" || { echo "could not switch cudarc to dynamic-loading in $PATCHED/Cargo.toml" >&2; exit 1; }
fi

export PATH="$CU/bin:$PATH" CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90} CUDARC_CUDA_VERSION=13000 LIBRARY_PATH="$LINK"
export RUSTFLAGS="-L native=$LINK -C link-arg=-Wl,-rpath,\$ORIGIN:\$ORIGIN/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:/usr/local/nvidia/lib64"
export CARGO_TARGET_DIR=$ROOT/target/cuda/build
# the patch rewrites candle-core's source in Cargo.lock: keep the committed lock untouched
cp Cargo.lock target/cuda/Cargo.lock.orig
trap 'cp target/cuda/Cargo.lock.orig Cargo.lock' EXIT
cargo build --release -p streamrag --features cuda --config "patch.crates-io.candle-core.path=\"$PATCHED\""

OUT=$ROOT/target/cuda/dist
rm -rf "$OUT" && mkdir -p "$OUT/lib"
cp "$CARGO_TARGET_DIR/release/streamrag" "$OUT/streamrag"
strip "$OUT/streamrag"
cp "$CU/lib/libcudart.so.13" "$OUT/lib/"
tar -C "$OUT" -czf "$ROOT/target/cuda/streamrag-cuda.tar.gz" .
ls -la "$ROOT/target/cuda/streamrag-cuda.tar.gz"
