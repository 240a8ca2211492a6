#!/usr/bin/env bash
# Side by side: `pocketlm bench` of one file and binary under two sets of
# flags, in alternating rounds (the order flips every round), then the median
# tokens/s of each test and the ratio B / A.  On a shared, noisy machine only
# the ratio of medians means anything.  bench/ab-repack.sh and
# bench/ab-coarse.sh are this script with their flags.
#   bench/ab-flags.sh MODEL.gguf ROUNDS A_LABEL=A_FLAGS B_LABEL=B_FLAGS [bench args...]
#   e.g. bench/ab-flags.sh m.gguf 5 plain=--no-repack --repack=--repack -p 512 -n 64 -t 2
set -euo pipefail
model=$1 rounds=$2 a=$3 b=$4; shift 4
bin=${PLM_BIN:-$(dirname "$0")/../build/pocketlm}
out=$(mktemp); trap 'rm -f "$out"' EXIT
run() { # $1 = LABEL=FLAGS, rest = bench args
  local label=${1%%=*} flags=${1#*=}; shift
  # shellcheck disable=SC2086  # FLAGS is a list of words
  "$bin" bench -m "$model" -r 1 -o csv "$@" $flags 2>/dev/null | tail -n +2 |
    awk -F'","' -v l="$label" '{ t = ($18 != "0") ? "pp" $18 : "tg" $19; print l, t, $24 }' >> "$out"
}
for ((i = 0; i < rounds; i++)); do
  if ((i % 2 == 0)); then run "$a" "$@"; run "$b" "$@"; else run "$b" "$@"; run "$a" "$@"; fi
done
python3 - "$out" "$model" "${a%%=*}" "${b%%=*}" <<'PY'
import sys, statistics as st
out, model, la, lb = sys.argv[1:5]
rows = [l.split() for l in open(out)]
tests = sorted({t for _, t, _ in rows})
print(f"{model}: medians of {len(rows) // (2 * len(tests))} alternating rounds (tokens/s)")
for t in tests:
    a = st.median(float(v) for l, tt, v in rows if l == la and tt == t)
    b = st.median(float(v) for l, tt, v in rows if l == lb and tt == t)
    print(f"  {t:6s} {la} {a:8.2f}  {lb} {b:8.2f}  ratio {b / a:.3f}")
PY
