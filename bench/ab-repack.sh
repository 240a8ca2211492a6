#!/usr/bin/env bash
# Side by side: `pocketlm bench` with and without --repack on the same file,
# in alternating rounds (the order flips every round), then the median
# tokens/s of each test and their ratio.  On a shared, noisy machine only
# the ratio of medians means anything.
#   bench/ab-repack.sh MODEL.gguf [ROUNDS] [extra bench args...]
set -euo pipefail
model=$1; rounds=${2:-5}; shift $(( $# >= 2 ? 2 : 1 ))
bin=${PLM_BIN:-$(dirname "$0")/../build/pocketlm}
out=$(mktemp); trap 'rm -f "$out"' EXIT
run() { # $1 = label, rest = extra flags
  local label=$1; shift
  "$bin" bench -m "$model" -p 512 -n 64 -r 1 -o csv "$@" 2>/dev/null | tail -n +2 |
    awk -F'","' -v l="$label" '{ t = ($18 != "0") ? "pp" $18 : "tg" $19; print l, t, $24 }' >> "$out"
}
for ((i = 0; i < rounds; i++)); do
  if ((i % 2 == 0)); then run plain --no-repack "$@"; run repack --repack "$@"; else run repack --repack "$@"; run plain --no-repack "$@"; fi
done
python3 - "$out" "$model" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
tests = sorted({t for _, t, _ in rows})
print(f"{sys.argv[2]}: medians of {len(rows) // (2 * len(tests))} alternating rounds (tokens/s)")
for t in tests:
    p = st.median(float(v) for l, tt, v in rows if l == "plain" and tt == t)
    r = st.median(float(v) for l, tt, v in rows if l == "repack" and tt == t)
    print(f"  {t:6s} plain {p:8.2f}  --repack {r:8.2f}  ratio {r / p:.3f}")
PY
