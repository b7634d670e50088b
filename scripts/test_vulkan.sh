#!/usr/bin/env bash
# The Vulkan backend's tests on lavapipe (Mesa's CPU Vulkan driver): its kernels, and whole
# dense models against the CPU (tests/models.rs: the tiny models of make_tiny_models.sh and
# SmolLM2-135M, which must be in place with CI=true); then one build of the `strata` binary
# with the `vulkan` feature and short `strata run -ngl 99` runs on the device (SmolLM2-135M,
# qwen3moe-tiny, qwen3next-tiny, qwen4exp-tiny), and one `-ngl 2` run (the last half of
# qwen4exp-tiny's layers), each timed.
#
# Needs the Vulkan loader and lavapipe (Debian: libvulkan1 mesa-vulkan-drivers), which .ci/run
# installs; the shaders' compiler (glslang) is built from source by cargo.
# With CI=true a missing Vulkan device fails the tests instead of skipping them.
#
#   scripts/test_vulkan.sh          both parts
#   scripts/test_vulkan.sh tests    the crate's build and tests only
#   scripts/test_vulkan.sh cli      the `strata` runs on the device only (the `vulkan`
#                                   feature is on by default: the same build as README's)
set -euo pipefail
part="${1:-all}"
case "$part" in
  all | tests | cli) ;;
  *) echo "usage: $0 [tests|cli]" >&2 && exit 2 ;;
esac
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac

icd="/usr/share/vulkan/icd.d/lvp_icd.$(uname -m).json"
if [ -z "${VK_ICD_FILENAMES:-}" ] && [ -f "$icd" ]; then
  export VK_ICD_FILENAMES="$icd"
fi
echo "VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-(loader default)}"

secs() { date +%s.%N; }
took() { awk -v a="$1" -v b="$2" -v what="$3" 'BEGIN { printf "vulkan: %s took %.0f s\n", what, b - a }'; }
if [ "$part" = all ] || [ "$part" = tests ]; then
  t0=$(secs)
  cargo build --release --locked -p strata-vulkan --tests
  t1=$(secs)
  cargo test --release --locked -p strata-vulkan
  t2=$(secs)
  took "$t0" "$t1" "building strata-vulkan and its tests"
  took "$t1" "$t2" "running its tests"
fi
if [ "$part" = all ] || [ "$part" = cli ]; then
  t0=$(secs)
  cargo build --release --locked -p strata-cli
  t1=$(secs)
  "$target/release/strata" devices
  took "$t0" "$t1" "building strata"
  smol="${STRATA_MODELS_DIR:-$HOME/.cache/strata/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
  if [ ! -f "$smol" ] && [ "${CI:-}" = true ]; then
    echo "vulkan: $smol is missing (CI=true)" >&2
    exit 1
  fi
  if [ -f "$smol" ]; then
    t0=$(secs)
    out=$("$target/release/strata" run -m "$smol" -p "The capital of France is" -n 4 --temp 0 -ngl 99 2>&1)
    t1=$(secs)
    echo "$out"
    echo "$out" | grep -q "offloaded 30/30 layers" || { echo "vulkan: -ngl 99 did not offload" >&2; exit 1; }
    echo "$out" | grep -q "Paris" || { echo "vulkan: -ngl 99 did not answer Paris" >&2; exit 1; }
    took "$t0" "$t1" "strata run -ngl 99 (SmolLM2-135M, 4 tokens)"
  fi
  # same_as_cpu NAME N [NGL]: tiny model NAME in F32 (no activation quantization on the CPU)
  # is offloaded under -ngl NGL (default 99: whole; 2: its last 2 of 4 layers, the CPU
  # running the embedding and layers 0..2) and gives the CPU's N greedy tokens. A missing
  # file fails with CI=true.
  same_as_cpu() {
    local name="$1" n="$2" ngl="${3:-99}" file gpu cpu t0 t1 placed
    file="${STRATA_TINY_DIR:-$HOME/.cache/strata/tiny}/$name/$name-F32.gguf"
    if [ ! -f "$file" ]; then
      [ "${CI:-}" = true ] && { echo "vulkan: $file is missing (CI=true)" >&2; exit 1; }
      echo "vulkan: $name skipped: $file is missing"
      return
    fi
    t0=$(secs)
    gpu=$("$target/release/strata" run -m "$file" -p "The capital of France is" -n "$n" --temp 0 -ngl "$ngl" 2>"$target/$name-ngl.err")
    cpu=$("$target/release/strata" run -m "$file" -p "The capital of France is" -n "$n" --temp 0 2>/dev/null)
    t1=$(secs)
    placed=$((ngl < 4 ? ngl : 4))
    grep -q "offloaded $placed/4 layers" "$target/$name-ngl.err" || { echo "vulkan: $name was not offloaded (-ngl $ngl)" >&2; cat "$target/$name-ngl.err" >&2; exit 1; }
    [ "$gpu" = "$cpu" ] || { printf 'vulkan: %s F32 text differs\n-ngl %s: %s\ncpu:     %s\n' "$name" "$ngl" "$gpu" "$cpu" >&2; exit 1; }
    echo "vulkan: $name F32 with -ngl $ngl gives the CPU's $n greedy tokens"
    took "$t0" "$t1" "strata run $name F32 (-ngl $ngl and CPU, $n tokens each)"
  }
  # qwen3moe: routed experts on the device.
  same_as_cpu qwen3moe-tiny 16
  # qwen3next: Gated DeltaNet layers, gated attention, routed + shared experts.
  same_as_cpu qwen3next-tiny 16
  # qwen4exp: hyper-connections, QSA with its indexer, PLE, Gated DeltaNet, experts; 24 tokens
  # after the prompt's 6 reach positions past QSA's budget (19 on), which attend over kept blocks.
  same_as_cpu qwen4exp-tiny 24
  # Partial offload: the embedding and layers 0..2 on the CPU, the residual handed to the
  # device, layers 2..4 (qwen4exp's PLE layer and its QSA attention layer) and the LM head there.
  same_as_cpu qwen4exp-tiny 24 2
fi
