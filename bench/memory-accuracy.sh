#!/usr/bin/env bash
# Predicted (pocketlm plan) vs measured (/usr/bin/time -v) peak RSS with the
# context filled: for each -c and KV type, a prompt of c-16 tokens is
# evaluated and generation runs until the context is full.
# usage: bench/memory-accuracy.sh MODEL.gguf [threads=2] [--no-mmap]
#   --no-mmap: weights read into anonymous memory, in the plan and the run.
set -euo pipefail
model=$1
threads=${2:-2}
mmap_flag=${3:-}
bin=${POCKETLM_BIN:-$(dirname "$0")/../build/pocketlm}
readme=$(dirname "$0")/../README.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The longest prefix of a repeated text that tokenizes to at most $1 tokens.
make_prompt() {
  python3 - "$1" "$bin" "$model" "$readme" "$tmp" <<'PY'
import subprocess, sys
limit, bin, model, readme, tmp = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
words = open(readme).read().split() * 40
def ntok(k):
    open(f'{tmp}/t.txt', 'w').write(' '.join(words[:k]))
    out = subprocess.run([bin, 'tokenize', '-m', model, '-f', f'{tmp}/t.txt'], capture_output=True, text=True).stdout
    return len(out.split()) + 1  # + BOS
lo, hi = 1, len(words)
while lo < hi:
    mid = (lo + hi + 1) // 2
    lo, hi = (mid, hi) if ntok(mid) <= limit else (lo, mid - 1)
open(f'{tmp}/p{limit}.txt', 'w').write(' '.join(words[:lo]))
PY
}

weights=mmap
[ "$mmap_flag" = "--no-mmap" ] && weights=no-mmap
echo "| -c | KV | weights | predicted | measured | error |"
echo "|---|---|---|---|---|---|"
for c in 512 2048 4096; do
  make_prompt $((c - 16))
  for kv in f16 q8_0 q4_0; do
    pred=$("$bin" plan -m "$model" -c "$c" -b 512 -t "$threads" --cache-type-k $kv --cache-type-v $kv --bandwidth 1 $mmap_flag -o json |
           python3 -c 'import json,sys; print(json.load(sys.stdin)["bill"]["peak_rss"])')
    meas=$( { /usr/bin/time -v "$bin" run -m "$model" -c "$c" -b 512 -t "$threads" -ctk $kv -ctv $kv $mmap_flag \
              -f "$tmp/p$((c - 16)).txt" -n 100000 --ignore-eos --no-display-prompt >/dev/null; } 2>&1 |
            awk '/Maximum resident/ {print $6 * 1024}')
    python3 -c "p,m=$pred,$meas; print(f'| $c | $kv | $weights | {p/2**20:.1f} MiB | {m/2**20:.1f} MiB | {(p-m)/m*100:+.1f}% |')"
  done
done
