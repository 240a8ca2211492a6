#!/usr/bin/env bash
# Side by side: `pocketlm bench` (pp512, tg64) with and without --repack on the
# same file, in alternating rounds; medians and their ratio (bench/ab-flags.sh).
#   bench/ab-repack.sh MODEL.gguf [ROUNDS] [extra bench args...]
set -euo pipefail
model=$1; rounds=${2:-5}; shift $(( $# >= 2 ? 2 : 1 ))
exec "$(dirname "$0")/ab-flags.sh" "$model" "$rounds" plain=--no-repack --repack=--repack -p 512 -n 64 "$@"
