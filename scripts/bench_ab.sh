#!/usr/bin/env bash
# Two builds of Strata side by side: `strata bench --local` of each binary on the same models,
# alternating binaries each round, one line of tok/s per (model, binary, round).
#
# Usage: BASE=path/to/old/strata NEW=target/release/strata scripts/bench_ab.sh MODEL... [-- ARGS]
#   ARGS go to `strata bench --local` (default: -t 2 -p 512 -n 128 -r 3); ROUNDS (default 2).
# Build the old binary from a worktree: git worktree add /tmp/base REV && (cd /tmp/base &&
# cargo build --release -p strata-cli).
set -euo pipefail
base="${BASE:?set BASE to the old strata binary}"
new="${NEW:-target/release/strata}"
models=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do models+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-t 2 -p 512 -n 128 -r 3)
out="$(mktemp -d)"
for m in "${models[@]}"; do
  for round in $(seq "${ROUNDS:-2}"); do
    for which in base new; do
      bin="$base"; [ "$which" = new ] && bin="$new"
      f="$out/$which-$round.json"
      "$bin" bench --local -m "$m" "${args[@]}" --json "$f" >/dev/null 2>&1
      python3 - "$f" "$m" "$which" "$round" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
tests = " ".join(f'{r["test"]}={r["avg_ts"]:.1f}' for r in d["results"])
print(f"{sys.argv[2]} {sys.argv[3]} round {sys.argv[4]}: {tests}")
PY
    done
  done
done
rm -rf "$out"
