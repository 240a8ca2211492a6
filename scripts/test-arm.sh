#!/usr/bin/env bash
# Cross-builds pocketlm for 64-bit ARM into build-arm and tests it under
# qemu-user with every optional CPU feature on (-cpu max), so the neon,
# dotprod and i8mm kernel tables all run:
#   1. the C unit tests (not the node oracle tests, which need a native node);
#   2. tests/test_logits (llama.cpp's fixture logits) once per ARM table,
#      forced with PLM_KERNELS;
#   3. a greedy stories260K generation that must print exactly what the x86
#      build (build/pocketlm, built here if missing) prints.
# Installs what it needs when missing: the cross compiler, qemu-user, and the
# arm64 PCRE2/utf8proc packages through Debian multiarch.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "adding the arm64 architecture to dpkg" >&2
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
fi
scripts/deps.sh cmake make pkg-config gcc libpcre2-dev libutf8proc-dev \
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libpcre2-dev:arm64 libutf8proc-dev:arm64

start=$SECONDS
stamp() { echo "test-arm: $1 ($((SECONDS - start)) s)"; }

cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-arm -j"$(nproc)"
stamp "cross-built"

# 1. unit tests; ctest runs each through CMAKE_CROSSCOMPILING_EMULATOR
ctest --test-dir build-arm --output-on-failure -j"$(nproc)" -LE oracle
stamp "unit tests passed"

QEMU=(qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu)

# 2. end-to-end logits on every ARM table (the unit run above used the best, i8mm)
for k in neon dotprod i8mm; do
  (cd build-arm && PLM_KERNELS=$k "${QEMU[@]}" ./test_logits) >build-arm/test_logits.$k.log 2>&1 ||
    { cat build-arm/test_logits.$k.log; echo "test-arm: test_logits failed with PLM_KERNELS=$k" >&2; exit 1; }
  echo "test_logits PLM_KERNELS=$k: $(tail -n 1 build-arm/test_logits.$k.log)"
done
stamp "logits on neon, dotprod, i8mm"

# 3. the same text as the x86 build
if [ ! -x build/pocketlm ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target pocketlm
fi
run_args=(run -m ../shared/models/stories260K.gguf -p "Once upon a time" -n 64 --temp 0 --no-display-prompt --ignore-eos)
build/pocketlm "${run_args[@]}" >build-arm/run.x86.txt 2>/dev/null
for k in neon dotprod i8mm; do
  PLM_KERNELS=$k "${QEMU[@]}" build-arm/pocketlm "${run_args[@]}" >build-arm/run.$k.txt 2>/dev/null
  if ! cmp -s build-arm/run.x86.txt build-arm/run.$k.txt; then
    echo "test-arm: arm64 ($k) generation differs from x86:" >&2
    diff build-arm/run.x86.txt build-arm/run.$k.txt >&2 || true
    exit 1
  fi
done
[ -s build-arm/run.x86.txt ] || { echo "test-arm: the x86 generation printed nothing" >&2; exit 1; }
stamp "stories260K generation matches x86 on neon, dotprod, i8mm"
echo "test-arm: all passed"
