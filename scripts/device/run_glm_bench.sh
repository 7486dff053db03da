#!/usr/bin/env bash
# The one prepared script for the H200 (run through the device tool from the repository root,
# with target/cuda/streamrag-cuda.tar.gz built by scripts/build-cuda.sh and carried along:
#   carry ["target/cuda/streamrag-cuda.tar.gz"], command: bash scripts/device/run_glm_bench.sh).
# Writes everything under $OUT: the CPU/GPU correctness check, the Rust benchmark, the same
# computation in PyTorch on the same inputs, and nvidia-smi's peak memory.
set -uo pipefail
OUT=${OUT:-/tmp/glm-out}
# GLM_BIN: a folder that already holds the unpacked binary and lib/ (scripts/device/all.sh's)
REPO=$PWD
if [ -n "${GLM_BIN:-}" ]; then
  cd "$GLM_BIN"
else
  mkdir -p /tmp/glm && cd /tmp/glm && tar -xzf "$REPO/target/cuda/streamrag-cuda.tar.gz"
fi
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$(/opt/torch/.venv/bin/python3 -c "import nvidia,glob,os; print(':'.join(sorted(d for p in nvidia.__path__ for d in glob.glob(os.path.join(p,'*','lib')) if os.path.isdir(d))))"):/usr/local/nvidia/lib64:$PWD/lib"
# the device tool brings back 8 files at most: the memory trace stays outside $OUT
MEM=$(mktemp)
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$MEM" &
SMI=$!
# correctness: the same random weights on CPU and GPU, f32, one 600-triplet subgraph: the
# entity vectors must agree (the line "max |cpu - Cuda| = ...")
timeout ${CHECK_S:-120} ./streamrag bench glm --models small,base --triplets 600 --batch 1 --iters 1 --warmup 1 --device cuda --dtype f32 \
  --compare-cpu > "$OUT/check.txt" 2>&1
INPUTS=$(mktemp -d)
timeout ${BENCH_S:-300} ./streamrag bench glm --models small,base,large --triplets 600 --batch 1,32 --iters 20 --warmup 2 \
  --device cuda --dtype bf16 --dump-inputs "$INPUTS" > "$OUT/rust-bf16.txt" 2>&1
echo "rust exit $?" >> "$OUT/rust-bf16.txt"
timeout ${TORCH_S:-200} /opt/torch/.venv/bin/python3 "$REPO/scripts/device/torch_glm_bench.py" --inputs "$INPUTS" \
  --models small,base,large --batch 1,32 --dtype bf16 --iters 20 > "$OUT/torch-bf16.jsonl" 2>&1
echo "torch exit $?" >> "$OUT/torch-bf16.jsonl"
kill $SMI
echo "peak GPU memory MiB: $(sort -n "$MEM" | tail -1)" >> "$OUT/check.txt"
rm -rf "$INPUTS"
cat "$OUT"/*.txt "$OUT"/*.jsonl
