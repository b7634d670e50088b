#!/usr/bin/env bash
# Builds the tiny random qwen3moe / qwen3next checkpoints and GGUFs into ~/.cache/strata/tiny
# (see scripts/make_tiny_models.py). Installs the pinned torch/transformers into a venv under
# ~/.cache/strata/pyenv-tiny on first use (~6 GB, a few minutes); later runs are no-ops unless
# the script changed. Extra arguments go to make_tiny_models.py (e.g. --check).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/strata"
venv="$cache/pyenv-tiny"
req="scripts/requirements-tiny.txt"
host_python="$(command -v python3)"

if [[ ! -x "$venv/bin/python" ]] || ! cmp -s "$req" "$venv/requirements.txt"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$req"
  cp "$req" "$venv/requirements.txt"
fi
# convert_hf_to_gguf.py and gguf-py come from llama-cpp-python's source package.
src="$cache/src/llama_cpp_python-0.3.36"
if [[ ! -f "$src/vendor/llama.cpp/convert_hf_to_gguf.py" ]]; then
  mkdir -p "$cache/src"
  python3 -m pip download -q --no-deps --no-binary llama-cpp-python -d "$cache/src" llama-cpp-python==0.3.36
  tar -xzf "$cache/src/llama_cpp_python-0.3.36.tar.gz" -C "$cache/src"
fi
export STRATA_LLAMA_CPP_SRC="$src/vendor/llama.cpp"
# llama.cpp (llama-cpp-python 0.3.36, with its source tree for convert_hf_to_gguf.py) comes from
# the host Python, which also quantizes when llama-quantize is not on PATH.
# A fresh machine builds it from source (~7 min on 2 cores), for this CPU but without ggml's AMX
# kernels: on a VM that lists AMX but does not grant the tile state, `ldtilecfg` faults and
# every llama.cpp reference test dies with SIGSEGV (seen on a Sapphire Rapids VM). A build made
# before that rule (no stamp) is rebuilt; `--no-cache-dir` keeps pip from reusing its wheel.
# (GCC: an explicit -mno-amx-* wins over what -march=native turns on.)
stamp="$("$host_python" -c 'import llama_cpp, os; print(os.path.dirname(llama_cpp.__file__))' 2>/dev/null)/.strata-no-amx" || true
if ! "$host_python" -c 'import llama_cpp' 2>/dev/null || [ ! -e "$stamp" ]; then
  "$host_python" -m pip uninstall -q -y llama-cpp-python 2>/dev/null || true
  no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  CMAKE_BUILD_PARALLEL_LEVEL=2 \
  CMAKE_ARGS="-DGGML_NATIVE=ON -DCMAKE_C_FLAGS='$no_amx' -DCMAKE_CXX_FLAGS='$no_amx' -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF" \
    "$host_python" -m pip install -q --no-cache-dir llama-cpp-python==0.3.36
  "$host_python" -c 'import llama_cpp, os; open(os.path.join(os.path.dirname(llama_cpp.__file__), ".strata-no-amx"), "w").close()'
fi
exec "$venv/bin/python" scripts/make_tiny_models.py --quant-python "$host_python" "$@"
