#!/usr/bin/env bash
# pocketlm quantize against llama.cpp's quantizer on any model: quantizes it
# with both (llama.cpp's llama_model_quantize from node-llama-cpp's prebuilt
# libllama, loaded by bench/quantize-llamacpp.c), prints both times and
# compares the two files tensor by tensor.  Exit status 0 when identical.
# The fixtures are covered by tests/test_quantize.c; this is for the shapes
# they do not have (TinyLlama's 5632-wide rows, stories260K's 64/172-wide
# ones and their fallbacks).
#
#   bench/quantize-vs-llamacpp.sh MODEL.gguf TYPE [--pure] [-t N] [-o DIR] [-k]
#
# The two files are written to DIR (default /tmp) and deleted unless -k.
# Needs build/libpocketlm.a (or BUILD=dir) and tests/oracle/node_modules
# (scripts/test.sh installs it); x86-64 Linux.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build}"
case "${1:-}" in ""|-h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
bins="$root/tests/oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
lib="$(ls "$bins"/libllama.v*.so 2>/dev/null | head -1 || true)"
[ -n "$lib" ] || { echo "quantize-vs-llamacpp: no libllama in $bins (cd tests/oracle && npm ci)" >&2; exit 1; }
[ -f "$build/libpocketlm.a" ] || { echo "quantize-vs-llamacpp: no $build/libpocketlm.a (build first)" >&2; exit 1; }
helper="$build/quantize-llamacpp"
cc -O2 -std=gnu11 -I"$root/include" "$root/bench/quantize-llamacpp.c" "$build/libpocketlm.a" \
  $(pkg-config --libs libpcre2-8 libutf8proc) -lm -lpthread -ldl -o "$helper"
LD_LIBRARY_PATH="$bins${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$helper" "$lib" "$@"
