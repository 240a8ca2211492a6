#!/usr/bin/env bash
# Builds pocketlm and runs the whole test suite: C unit tests plus the oracle
# tests that compare against llama.cpp (npm node-llama-cpp, pinned in
# tests/oracle/package.json).  Installs what it needs when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh cmake gcc clang make pkg-config libpcre2-dev libutf8proc-dev libmicrohttpd-dev libjansson-dev libedit2 valgrind openjdk-17-jdk-headless chromium
# Node.js may come from elsewhere than Debian (its npm conflicts with Debian's): test for the commands.
command -v node >/dev/null && command -v npm >/dev/null || scripts/deps.sh nodejs npm
if [ ! -d tests/oracle/node_modules ] || [ tests/oracle/package-lock.json -nt tests/oracle/node_modules ]; then
  (cd tests/oracle && npm ci --no-audit --no-fund --loglevel=error)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
