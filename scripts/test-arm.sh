#!/usr/bin/env bash
# Cross-builds pocketlm for 64-bit ARM into build-arm and tests it under
# qemu-user with every optional CPU feature on (-cpu max), so the neon,
# dotprod and i8mm kernel tables all run:
#   0. test_exports on the arm64 libpocketlm.so (exports, stripped size <= 2 MiB);
#   1. the C unit tests (not the node oracle tests, which need a native node);
#   2. tests/test_logits (llama.cpp's fixture logits) once per ARM table,
#      forced with PLM_KERNELS;
#   3. a greedy stories260K generation that must print exactly what the x86
#      build (build/pocketlm, built here if missing) prints;
#   4. every architecture family against llama.cpp (tests/oracle/families.test.mjs,
#      one shape each, Q4_K_M): the x86 build and node-llama-cpp write the files
#      and llama.cpp's logits natively, the arm64 dump_logits runs under qemu
#      with the neon and the dotprod tables.
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
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libc6:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 \
  libmicrohttpd-dev:arm64 libjansson-dev:arm64 libedit2:arm64

# Tests that run build-arm/pocketlm as a command (popen/system) need the
# kernel to hand aarch64 ELF files to qemu: register qemu-user-binfmt's
# handler when binfmt_misc is not set up (containers and VMs often lack it).
BINFMT=/proc/sys/fs/binfmt_misc
if [ ! -e $BINFMT/qemu-aarch64 ]; then
  [ -e $BINFMT/register ] || $SUDO mount -t binfmt_misc binfmt_misc $BINFMT
  magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
  mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  printf '%s' ":qemu-aarch64:M:0:$magic:$mask:/usr/libexec/qemu-binfmt/aarch64-binfmt-P:P" |
    $SUDO tee $BINFMT/register >/dev/null
fi
# every qemu started here, directly or through binfmt, emulates all features
export QEMU_CPU=max

start=$SECONDS
stamp() { echo "test-arm: $1 ($((SECONDS - start)) s)"; }

cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-arm -j"$(nproc)"
stamp "cross-built"

# 0. the arm64 library's exports and its stripped size against the 2 MiB
#    budget (test_exports does this for host builds; ctest skips it here)
cmake -DLIB=build-arm/libpocketlm.so -DCHECK_SIZE=ON -DINCLUDE_DIR=include -DNM=aarch64-linux-gnu-nm \
  -DSTRIP=aarch64-linux-gnu-strip -DOUT=build-arm/libpocketlm-stripped.so -P tests/cmake/exports.cmake
stamp "arm64 exports and size"

# 1. unit tests; ctest runs each through CMAKE_CROSSCOMPILING_EMULATOR.
#    Not test_plan: it checks predicted against measured RSS, and under qemu
#    the measurement includes the emulator (~17 MiB more), besides taking ~6 min.
#    Not test_phone_sim: the emulator's own memory is not in the plans it
#    checks against the kernel's limits.
#    Not the four slowest under the emulator (27 min of CPU of the 45 the
#    unit tests took, 20x their native time), whose code is the portable C
#    that the native and sanitizer runs test, over kernels that the ARM run
#    tests here: test_imatrix (imatrix statistics and weighted quantizing;
#    the ARM risk, the compiler fusing a quantizer's multiply-adds, is
#    test_quantize's byte-for-byte check), test_spec_sampling (sampling
#    statistics; exact verification on ARM is test_spec's), test_gen_step
#    (batched sequences; bit-identical batch kernels are test_kernels' and
#    test_spec's), test_quality (perplexity and KLD arithmetic; the logits
#    are test_logits').
ctest --test-dir build-arm --output-on-failure -j"$(nproc)" -LE oracle \
  -E '^(test_plan|test_phone_sim|test_imatrix|test_spec_sampling|test_gen_step|test_quality)$'
stamp "unit tests passed"

# no -L: see the note in cmake/aarch64-linux-gnu.cmake
QEMU=(qemu-aarch64 -cpu max)

# 2. end-to-end logits on the other ARM tables (the unit run above used the
#    best, i8mm); about 100 s each under qemu on 2 cores
for k in neon dotprod; do
  (cd build-arm && PLM_KERNELS=$k "${QEMU[@]}" ./test_logits) >build-arm/test_logits.$k.log 2>&1 ||
    { cat build-arm/test_logits.$k.log; echo "test-arm: test_logits failed with PLM_KERNELS=$k" >&2; exit 1; }
  echo "test_logits PLM_KERNELS=$k: $(tail -n 1 build-arm/test_logits.$k.log)"
done
stamp "logits on neon and dotprod"

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

# 4. the families' logits against llama.cpp's (node and node-llama-cpp as
#    scripts/test.sh installs them); dump_logits is the arm64 one, through a
#    wrapper that picks the kernel table
command -v node >/dev/null && command -v npm >/dev/null || scripts/deps.sh nodejs npm
if [ ! -d tests/oracle/node_modules ] || [ tests/oracle/package-lock.json -nt tests/oracle/node_modules ]; then
  (cd tests/oracle && npm ci --no-audit --no-fund --loglevel=error)
fi
FAMILIES=test-llama3-tiny,test-qwen2-tiny,test-qwen3-tiny,test-granite-tiny,test-phi3-tiny,test-gemma2-tiny
FAMILIES+=,test-gemma3-tiny,test-qwen3moe-tiny,test-mixtral-tiny
for k in neon dotprod; do
  printf '#!/bin/sh\nPLM_KERNELS=%s exec qemu-aarch64 -cpu max "$(dirname "$0")/dump_logits" "$@"\n' $k \
    >build-arm/dump_logits.$k.sh
  chmod +x build-arm/dump_logits.$k.sh
  PLM_DUMP_LOGITS_BIN="$PWD/build-arm/dump_logits.$k.sh" PLM_FAMILIES=$FAMILIES PLM_FAMILY_FORMATS=Q4_K_M \
    PLM_FAMILY_REPACK=$([ $k = neon ] && echo 0 || echo 1) \
    PLM_FAMILY_QUANTIZER=0 POCKETLM_BIN="$PWD/build/pocketlm" node tests/oracle/families.test.mjs \
    >build-arm/families.$k.log 2>&1 ||
    { cat build-arm/families.$k.log; echo "test-arm: families against llama.cpp failed with PLM_KERNELS=$k" >&2; exit 1; }
  echo "families PLM_KERNELS=$k: $(tail -n 1 build-arm/families.$k.log)"
done
stamp "families' logits against llama.cpp on neon and dotprod"
echo "test-arm: all passed"
