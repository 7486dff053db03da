#!/usr/bin/env bash
# The one prepared script for the H200 (run through the device tool from the repository root,
# with target/cuda/streamrag-cuda.tar.gz built by scripts/build-cuda.sh and carried along:
#   carry ["target/cuda/streamrag-cuda.tar.gz"], command: bash scripts/device/run_glm_bench.sh).
# Writes everything under $OUT: the CPU/GPU correctness check, the Rust benchmark, the same
# computation in PyTorch on the same inputs, and nvidia-smi's peak memory.
set -uo pipefail
OUT=${OUT:-/tmp/glm-out}
mkdir -p "$OUT" /tmp/glm && cd /tmp/glm
tar -xzf "$OLDPWD/target/cuda/streamrag-cuda.tar.gz"
export LD_LIBRARY_PATH="$(/opt/torch/.venv/bin/python3 -c "import nvidia,glob,os; print(':'.join(sorted(d for p in nvidia.__path__ for d in glob.glob(os.path.join(p,'*','lib')) if os.path.isdir(d))))"):/usr/local/nvidia/lib64:/tmp/glm/lib"
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$OUT/gpu-mem.csv" &
SMI=$!
# correctness: the same random-weight encoder on CPU and GPU must agree (small graph)
./streamrag bench glm --models small --triplets 40 --batch 1 --iters 1 --warmup 0 --device cpu --dtype f32 > "$OUT/check-cpu.txt" 2>&1
./streamrag bench glm --models small --triplets 40 --batch 1 --iters 1 --warmup 1 --device cuda --dtype f32 > "$OUT/check-cuda.txt" 2>&1
mkdir -p "$OUT/inputs"
timeout 300 ./streamrag bench glm --models small,base,large --triplets 600 --batch 1,32 --iters 20 --warmup 2 \
  --device cuda --dtype bf16 --dump-inputs "$OUT/inputs" > "$OUT/rust-bf16.txt" 2>&1
echo "rust exit $?" >> "$OUT/rust-bf16.txt"
timeout 200 /opt/torch/.venv/bin/python3 "$OLDPWD/scripts/device/torch_glm_bench.py" --inputs "$OUT/inputs" \
  --models small,base,large --batch 1,32 --dtype bf16 --iters 20 > "$OUT/torch-bf16.jsonl" 2>&1
echo "torch exit $?" >> "$OUT/torch-bf16.jsonl"
kill $SMI
sort -n "$OUT/gpu-mem.csv" | tail -1 > "$OUT/gpu-mem-peak-mib.txt"
rm -rf "$OUT/inputs"
cat "$OUT"/*.txt "$OUT"/*.jsonl
