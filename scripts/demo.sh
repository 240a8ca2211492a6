#!/usr/bin/env bash
# Builds pocketlm and generates from the demo model (../shared/models/stories260K.gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh cmake gcc make pkg-config libpcre2-dev libutf8proc-dev libmicrohttpd-dev libjansson-dev
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
./build/pocketlm run -p "Once upon a time" -n 128 "$@"
