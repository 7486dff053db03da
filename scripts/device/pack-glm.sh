#!/usr/bin/env bash
# Packs what the GLM training + evaluation run on the H200 needs into one ignored file under
# the 64 MiB carry limit: the CUDA binary (xz), all-MiniLM-L6-v2 with its weights in f16
# (the loader converts to f32), the 2Wiki dataset and, with GRAPH_FROM=DIR (the --data
# directory of an earlier `streamrag eval` on 2Wiki), that graph (xz, ~4 MB), so that the
# device trains at once instead of indexing the corpus (~10 minutes on one extractor thread).
#   scripts/build-cuda.sh && GRAPH_FROM=/tmp/ev/2wiki scripts/device/pack-glm.sh
#                                                   -> target/device-glm.tar (~62 MB; the working tree
#                                                      travels too, 64 MiB in all)
# Then the device tool: carry ["target/device-glm.tar"], command
#   bash scripts/device/all.sh          (timeout_s 590; results under $OUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
MINILM=${STREAMRAG_MINILM_DIR:-$ROOT/.models/all-MiniLM-L6-v2}
DATASET=${DATASET:-$ROOT/../shared/datasets/2wikimultihopqa}
STAGE=$ROOT/target/device-glm
rm -rf "$STAGE" && mkdir -p "$STAGE/minilm" "$STAGE/bin" "$STAGE/2wiki"
tar -xzf "$ROOT/target/cuda/streamrag-cuda.tar.gz" -C "$STAGE/bin"
(cd "$STAGE/bin" && tar -cf - . | xz -T2 -6 > ../bin.tar.xz) && rm -rf "$STAGE/bin"
cp "$MINILM/config.json" "$MINILM/tokenizer.json" "$STAGE/minilm/"
python3 - "$MINILM/model.safetensors" "$STAGE/minilm/model.safetensors" <<'PY'
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
out_header, chunks, offset = {}, [], 0
for name, t in header.items():
    if name == "__metadata__":
        out_header[name] = t
        continue
    a, b = t["data_offsets"]
    raw = data[a:b]
    if t["dtype"] == "F32":
        count = (b - a) // 4
        raw = struct.pack("<%de" % count, *struct.unpack("<%df" % count, raw))
        dtype = "F16"
    else:
        dtype = t["dtype"]
    out_header[name] = {"dtype": dtype, "shape": t["shape"], "data_offsets": [offset, offset + len(raw)]}
    chunks.append(raw)
    offset += len(raw)
h = json.dumps(out_header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    for c in chunks:
        f.write(c)
PY
# f16 weights still lose ~10% to xz: 45.4 -> 40.8 MB, which keeps the pack under the limit
(cd "$STAGE" && tar -cf - minilm | xz -T2 -6 > minilm.tar.xz) && rm -rf "$STAGE/minilm"
cp "$DATASET"/*.json.gz "$STAGE/2wiki/"
if [ -n "${GRAPH_FROM:-}" ]; then
  [ -f "$GRAPH_FROM/graph/db" ] || { echo "no graph at $GRAPH_FROM/graph (GRAPH_FROM: an eval's --data directory)" >&2; exit 1; }
  tar -cf - -C "$GRAPH_FROM" graph | xz -T2 -6 > "$STAGE/data.tar.xz"
fi
tar -cf "$ROOT/target/device-glm.tar" -C "$STAGE" .
ls -la "$ROOT/target/device-glm.tar"
