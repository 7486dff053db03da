#!/usr/bin/env bash
# On the H200 (through the device tool, with target/device-glm.tar from pack-glm.sh carried):
# trains the GLM retriever at the paper's budget (600 triplets, 2 epochs, batch 2) on 2Wiki
# questions 0-499 on CUDA, evaluates it on 500-999 through the query stage (on the GPU), and
# records peak GPU memory. Everything lands under $OUT; the checkpoint stays there (too big
# to bring back with its optimizer state, so only glm.json comes back).
set -uo pipefail
OUT=${OUT:-/tmp/glm-train-out}
W=/tmp/glm-train
mkdir -p "$OUT" "$W/bin" && tar -xf target/device-glm.tar -C "$W" && tar -xJf "$W/bin.tar.xz" -C "$W/bin"
export LD_LIBRARY_PATH="$(/opt/torch/.venv/bin/python3 -c "import nvidia,glob,os; print(':'.join(sorted(d for p in nvidia.__path__ for d in glob.glob(os.path.join(p,'*','lib')) if os.path.isdir(d))))"):/usr/local/nvidia/lib64:$W/bin/lib"
export STREAMRAG_MINILM_DIR=$W/minilm STREAMRAG_LOG=warn,streamrag::retrieval_cmd=info
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/gpu-mem.csv" &
SMI=$!
cd "$W"
timeout 330 ./bin/streamrag train --dataset 2wiki --questions 0..500 --out ckpt --device cuda \
  --max-triplets 600 --epochs 2 --batch-size 2 --save-every 100 > "$OUT/train.txt" 2>&1
echo "train exit $?" >> "$OUT/train.txt"
cp ckpt/glm.json "$OUT/" 2>/dev/null
timeout 150 ./bin/streamrag eval --dataset 2wiki --questions 500..1000 --retriever glm --checkpoint ckpt \
  --glm-batch 8 --concurrency 16 --report "$OUT/glm-test.json" > "$OUT/eval.txt" 2>&1
echo "eval exit $?" >> "$OUT/eval.txt"
kill $SMI
sort -n "$OUT/gpu-mem.csv" | tail -1 > "$OUT/gpu-mem-peak-mib.txt"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r.pop('per_question',None); json.dump(r,open(sys.argv[1],'w'),indent=1)" "$OUT/glm-test.json" 2>/dev/null
tail -3 "$OUT/train.txt"; cat "$OUT/eval.txt" "$OUT/gpu-mem-peak-mib.txt"
