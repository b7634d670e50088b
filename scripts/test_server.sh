#!/usr/bin/env bash
# Runs the HTTP server tests (tests/server) with the official openai and anthropic Python
# clients against target/release/strata serve. Needs the release binary and the models
# smollm2-135m and qwen2.5-coder-0.5b (strata pull). The clients go into a virtualenv cached
# under ~/.cache/strata/pyenv-server.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${XDG_CACHE_HOME:-$HOME/.cache}/strata"
venv="$cache/pyenv-server"
req=tests/server/requirements.txt
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$req" "$venv/requirements.txt"; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.txt"
fi
if [ ! -x target/release/strata ]; then
  cargo build --release --locked -p strata-cli
fi
exec "$venv/bin/python" -m pytest tests/server -q "$@"
