#!/usr/bin/env bash
# Runs strata-quant's tests for aarch64 under qemu-user on an x86-64 machine, so the NEON
# kernels (Isa::Neon) are checked against the scalar references (tests/simd.rs, tests/gemm.rs).
# qemu's default CPU ("max") has the dotprod extension the path needs; STRATA_TEST_REQUIRE_ISA
# makes those tests fail rather than skip the path if it ever does not. Installs nothing: it
# needs the rustup target aarch64-unknown-linux-gnu and, on Debian/Ubuntu,
#   apt-get install -y qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
# Extra arguments go to cargo test (e.g. `-- --nocapture`).
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-gnu
missing=()
command -v cargo >/dev/null || missing+=("cargo (rustup)")
[ -d "$(rustc --print sysroot 2>/dev/null)/lib/rustlib/$target" ] ||
  missing+=("the Rust target $target (rustup target add $target)")
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=("aarch64-linux-gnu-gcc (apt package gcc-aarch64-linux-gnu)")
[ -d /usr/aarch64-linux-gnu/lib ] || missing+=("/usr/aarch64-linux-gnu (apt package libc6-dev-arm64-cross)")
command -v qemu-aarch64 >/dev/null || missing+=("qemu-aarch64 (apt package qemu-user)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "test_aarch64.sh: missing tools:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

export STRATA_TEST_REQUIRE_ISA=neon
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
  cargo test --release --target "$target" -p strata-quant "$@"
