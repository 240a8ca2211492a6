#!/usr/bin/env bash
# Side by side: `pocketlm bench` prefill with the coarse int8 K-quant products
# (--coarse-prefill) and without (the default), on the same file and binary, in
# alternating rounds (the order flips every round); median tokens/s of each
# and their ratio.  On a shared, noisy machine only the ratio means anything.
#   bench/ab-coarse.sh MODEL.gguf [ROUNDS] [extra bench args, e.g. -t 2 -p 512]
set -euo pipefail
model=$1; rounds=${2:-5}; shift $(( $# >= 2 ? 2 : 1 ))
bin=${PLM_BIN:-$(dirname "$0")/../build/pocketlm}
out=$(mktemp); trap 'rm -f "$out"' EXIT
run() { # $1 = label, rest = extra flags
  local label=$1; shift
  "$bin" bench -m "$model" -p 512 -n 0 -r 1 -o csv "$@" 2>/dev/null | tail -n +2 |
    awk -F'","' -v l="$label" '{ print l, "pp" $18, $24 }' >> "$out"
}
for ((i = 0; i < rounds; i++)); do
  if ((i % 2 == 0)); then run exact "$@"; run coarse --coarse-prefill "$@"; else run coarse --coarse-prefill "$@"; run exact "$@"; fi
done
python3 - "$out" "$model" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
tests = sorted({t for _, t, _ in rows})
print(f"{sys.argv[2]}: medians of {len(rows) // (2 * len(tests))} alternating rounds (tokens/s)")
for t in tests:
    e = st.median(float(v) for l, tt, v in rows if l == "exact" and tt == t)
    c = st.median(float(v) for l, tt, v in rows if l == "coarse" and tt == t)
    print(f"  {t:6s} exact {e:8.2f}  --coarse-prefill {c:8.2f}  ratio {c / e:.3f}")
PY
