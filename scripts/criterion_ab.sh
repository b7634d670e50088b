#!/usr/bin/env bash
# Criterion bench binaries of two or more builds side by side: each round runs every binary
# once on the same benches, pinned to one core, in turn; then, per bench, each binary's median
# time over the rounds and the median over rounds of its time / the first binary's time (the
# paired ratio: on a VM whose speed drifts within minutes, only ratios of neighbouring runs
# mean anything). Below 1 is faster than the first binary.
#
# Usage: scripts/criterion_ab.sh OUT REGEX BIN_A BIN_B [BIN_C ...]
#   REGEX  criterion's bench filter, e.g. '^expert_dram/IQ4_NL/2048x512/gemm/avx2/(8|10)$'
#   BIN_*  bench executables (`cargo bench -p strata-quant --bench gemm --no-run` prints the
#          path; copy it aside before building the next variant)
# Settings (environment): ROUNDS (default 4), CORE (default 1), WARMUP / MEASURE seconds
# (default 1 / 3). Writes OUT/rR_S.txt (round R, side S = A, B, ...) and OUT/summary.txt.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '8,13p' "$0" >&2; exit 2; }
out="$1" re="$2"
shift 2
mkdir -p "$out"
sides=(A B C D E F G H)
[ $# -le ${#sides[@]} ] || { echo "at most ${#sides[@]} binaries" >&2; exit 2; }
for round in $(seq "${ROUNDS:-4}"); do
  i=0
  for bin in "$@"; do
    # Criterion keeps its baselines under ./target/criterion; run it in OUT.
    (cd "$out" && taskset -c "${CORE:-1}" "$bin" --bench "$re" --noplot \
      --warm-up-time "${WARMUP:-1}" --measurement-time "${MEASURE:-3}") \
      >"$out/r${round}_${sides[$i]}.txt" 2>&1
    i=$((i + 1))
  done
done
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, re, statistics, sys
from collections import defaultdict

to_us = {"ps": 1e-6, "ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
# "name\n   time:   [low median high]" or on one line; "change:" lines carry percentages.
point = re.compile(r"^(\S+)\s*\n?\s*time:\s+\[\S+ \S+ ([\d.]+) (\S+) \S+ \S+\]", re.M)
times = defaultdict(lambda: defaultdict(dict))  # bench -> side -> round -> µs
for path in glob.glob(sys.argv[1] + "/r*_*.txt"):
    rnd, side = re.search(r"r(\d+)_([A-H])\.txt$", path).groups()
    for name, value, unit in point.findall(open(path).read()):
        times[name][side][int(rnd)] = float(value) * to_us[unit]
sides = sorted({s for t in times.values() for s in t})
print(f"{'bench':52s}" + "".join(f"{s + ' µs':>10s}" for s in sides)
      + "".join(f"{s + '/A':>7s}" for s in sides[1:]))
for name in sorted(times):
    t = times[name]
    line = f"{name:52s}" + "".join(
        f"{statistics.median(t[s].values()):10.1f}" if t[s] else f"{'-':>10s}" for s in sides)
    for s in sides[1:]:
        common = set(t["A"]) & set(t[s])
        ratio = statistics.median(t[s][r] / t["A"][r] for r in common) if common else None
        line += f"{ratio:7.3f}" if ratio else f"{'-':>7s}"
    print(line)
PY
