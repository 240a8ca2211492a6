#!/usr/bin/env bash
# Time to first token, cold (the model file dropped from the page cache) vs
# warm (already cached), with mmap + MADV_WILLNEED, and with --no-mmap.
# usage: bench/ttft.sh MODEL.gguf [runs=3]
set -euo pipefail
model=$1
runs=${2:-3}
bin=${POCKETLM_BIN:-$(dirname "$0")/../build/pocketlm}

drop_cache() { dd if="$model" iflag=nocache count=0 status=none; }  # posix_fadvise(DONTNEED)

ttft() {  # prints seconds for: load + 1-token prompt + first generated token
  local start end
  start=$(date +%s.%N)
  "$bin" run -m "$model" -p "Once" -n 1 -c 256 -t 1 "$@" >/dev/null 2>&1
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for mode in mmap no-mmap; do
  flag=(); [ "$mode" = no-mmap ] && flag=(--no-mmap)
  cold=$(for _ in $(seq "$runs"); do drop_cache; ttft "${flag[@]}"; done | median)
  warm=$(for _ in $(seq "$runs"); do ttft "${flag[@]}"; done | median)
  printf "%-8s cold %6.2f s   warm %6.2f s\n" "$mode" "$cold" "$warm"
done
