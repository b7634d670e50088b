#!/usr/bin/env bash
# Builds the tiny random qwen4exp checkpoints, GGUFs and transformers reference logits into
# ~/.cache/strata/tiny/qwen4exp-* (see scripts/make_tiny_qwen4exp.py). A no-op when they are up
# to date. transformers 5.23 (the qwen4_exp modelling code) goes into its own venv,
# ~/.cache/strata/pyenv-qwen4exp; the converter runs under make_tiny_models.sh's venv
# (transformers 4.57: 5.x rewrites layer_types and the converter then writes no indexer).
# torch is borrowed from that venv through a .pth file rather than downloaded twice.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/strata"
venv="$cache/pyenv-qwen4exp"
tiny="$cache/pyenv-tiny"
req="scripts/requirements-qwen4exp.txt"
host_python="$(command -v python3)"

# pyenv-tiny (torch, transformers 4.57, the llama.cpp sources, llama-cpp-python on the host):
# make_tiny_models.sh sets all of it up and is itself a no-op when its outputs exist.
if [[ ! -x "$tiny/bin/python" ]] || ! "$host_python" -c 'import llama_cpp' 2>/dev/null \
   || [[ ! -f "$cache/src/llama_cpp_python-0.3.36/vendor/llama.cpp/convert_hf_to_gguf.py" ]]; then
  scripts/make_tiny_models.sh
fi
if [[ ! -x "$venv/bin/python" ]] || ! cmp -s "$req" "$venv/requirements.txt"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$req"
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  tiny_site="$("$tiny/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # Appended after the venv's own site-packages, so its transformers 5.23 wins over 4.57.
  echo "$tiny_site" > "$site/zz_torch_from_pyenv_tiny.pth"
  cp "$req" "$venv/requirements.txt"
fi
export STRATA_LLAMA_CPP_SRC="$cache/src/llama_cpp_python-0.3.36/vendor/llama.cpp"
exec "$venv/bin/python" scripts/make_tiny_qwen4exp.py --convert-python "$tiny/bin/python" \
  --quant-python "$host_python" "$@"
