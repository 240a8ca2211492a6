#!/usr/bin/env bash
# Side by side: `pocketlm bench` prefill (pp512) with the coarse int8 K-quant
# products (--coarse-prefill) and without (the default), on the same file and
# binary, in alternating rounds; medians and their ratio (bench/ab-flags.sh).
#   bench/ab-coarse.sh MODEL.gguf [ROUNDS] [extra bench args, e.g. -t 2 -p 512]
set -euo pipefail
model=$1; rounds=${2:-5}; shift $(( $# >= 2 ? 2 : 1 ))
exec "$(dirname "$0")/ab-flags.sh" "$model" "$rounds" exact= --coarse-prefill=--coarse-prefill -p 512 -n 0 "$@"
