#!/usr/bin/env bash
# ARM instruction counts of the decode and prefill inner loops
# (docs/BENCHMARKS.md): ours (src/kernels/arm/repacked.c, the SMMLA tiles of
# repacked_i8mm.c, plain dotprod vec_dots) against
# ik_llama.cpp's and llama.cpp's equivalents, cross-compiled to aarch64
# assembly and cut into loops by bench/asm-loops.py, whose innermost loop
# bodies go through LLVM 19's llvm-mca (cortex-x3, neoverse-v2 models).
# Not part of the test suite (needs the peers' sources and llvm-19).
#   bench/arm-isa.sh [IK_SRC=/tmp/ik] [LCPP_SRC=/tmp/lcpp]
# Prints one block of loops per function; dividing a loop's instruction
# count by the rows x 32-element blocks one iteration covers gives the
# table's numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
ik=${IK_SRC:-/tmp/ik}
lcpp=${LCPP_SRC:-/tmp/lcpp}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
loops() { python3 bench/asm-loops.py "$1" "$2" --mca cortex-x3 neoverse-v2; }

# Ours: one out-of-line function per format around the tile kernels, for
# one token (decode) and four (a prefill tile).
{
  echo '#include "kernels/arm/repacked.c"'
  for t in Q4_0 Q8_0 IQ4_NL; do
    for c in 1 4; do
      echo "PLM_TARGET_DOTPROD void isa_${t}_$c(const uint8_t *g, int64_t nb, const char *a, size_t as, float *o) { rpa_tile(PLM_TYPE_$t, $c, g, nb, a, as, o, 16); }"
    done
  done
  for t in Q4_K Q5_K Q6_K IQ4_XS; do
    for c in 1 4; do
      echo "PLM_TARGET_DOTPROD void isa_${t}_$c(const uint8_t *g, int64_t nb, const char *a, size_t as, float *o) { rpk_tile(PLM_TYPE_$t, $c, g, nb, a, as, o, 16); }"
    done
  done
} > "$out/ours.c"
aarch64-linux-gnu-gcc -O3 -std=gnu11 -Isrc -Iinclude -S -o "$out/ours.s" "$out/ours.c"
for t in Q4_0 Q8_0 IQ4_NL Q4_K Q5_K Q6_K IQ4_XS; do
  for c in 1 4; do loops "$out/ours.s" "isa_${t}_$c"; done
done
# The i8mm table's SMMLA tiles (repacked_i8mm.c): 16 rows x 4 tokens.
{
  echo '#include "kernels/arm/repacked_i8mm.c"'
  for t in Q4_0 Q8_0 IQ4_NL; do
    echo "PLM_TARGET_I8MM void isa_mm_${t}_4(const uint8_t *g, int64_t nb, const char *a, size_t as, float *o) { rpm_tile32(PLM_TYPE_$t, 2, g, nb, a, as, o, 16); }"
  done
  for t in Q4_K Q5_K Q6_K IQ4_XS; do
    echo "PLM_TARGET_I8MM void isa_mm_${t}_4(const uint8_t *g, int64_t nb, const char *a, size_t as, float *o) { rpm_tile_k(PLM_TYPE_$t, 2, g, nb, a, as, o, 16); }"
  done
} > "$out/ours-i8mm.c"
aarch64-linux-gnu-gcc -O3 -std=gnu11 -Isrc -Iinclude -S -o "$out/ours-i8mm.s" "$out/ours-i8mm.c"
for t in Q4_0 Q8_0 IQ4_NL Q4_K Q5_K Q6_K IQ4_XS; do loops "$out/ours-i8mm.s" "isa_mm_${t}_4"; done

# Executed instructions per 16-row block (per super-block for the K
# formats) of each tile, whatever its loop nest: the tile runs over 1 and 3
# blocks of zeros under qemu -singlestep (one instruction a translation
# block, each logged as it runs) and the difference is halved.  Needs the
# cross build (build-arm/libpocketlm.a).
if [ -f build-arm/libpocketlm.a ]; then
  cat > "$out/drv.c" <<'EOF_DRV'
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
typedef void (*tile_fn)(const uint8_t *, int64_t, const char *, size_t, float *);
int main(int argc, char **argv) {
    static uint8_t w[16 * 292 * 8];
    static char a[4 * 292 * 8];
    static float o[64];
    tile_fn f = argc == 3 ? (tile_fn)dlsym(RTLD_DEFAULT, argv[1]) : NULL;
    if (!f) return 1;
    f(w, atoi(argv[2]), a, sizeof a / 4, o);
    return 0;
}
EOF_DRV
  aarch64-linux-gnu-gcc -O3 -std=gnu11 -Isrc -Iinclude -c -o "$out/ours.o" "$out/ours.c"
  aarch64-linux-gnu-gcc -O3 -std=gnu11 -Isrc -Iinclude -c -o "$out/ours-i8mm.o" "$out/ours-i8mm.c"
  aarch64-linux-gnu-gcc -O2 -rdynamic -o "$out/drv" "$out/drv.c" "$out/ours.o" "$out/ours-i8mm.o" build-arm/libpocketlm.a -lm -lpthread -ldl
  traced() { QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 -cpu max -singlestep -d exec,nochain -D /dev/stdout "$out/drv" "$1" "$2" | grep -c '^Trace'; }
  for t in Q4_0 Q8_0 IQ4_NL Q4_K Q5_K Q6_K IQ4_XS; do
    for f in "isa_${t}_1" "isa_${t}_4" "isa_mm_${t}_4"; do
      echo "$f: $(( ($(traced "$f" 3) - $(traced "$f" 1)) / 2 )) instructions executed per block"
    done
  done
fi
aarch64-linux-gnu-gcc -O3 -std=gnu11 -Isrc -Iinclude -S -o "$out/dotprod.s" src/kernels/arm/dotprod.c
for f in q4_0 q8_0 iq4_nl q4_K q5_K q6_K iq4_xs; do loops "$out/dotprod.s" "vec_dot_${f}_dotprod"; done

# llama.cpp: the plain ARM vec_dots (quants.c) and its repacked gemv
# (repack.cpp), built for armv8.2-a+dotprod+i8mm.
cxx=(clang++ --target=aarch64-linux-gnu -O3 -std=c++17 -march=armv8.2-a+dotprod+i8mm+fp16 -S -w
  -isystem /usr/include/c++/12 -isystem /usr/include/x86_64-linux-gnu/c++/12 -isystem /usr/aarch64-linux-gnu/include)
cc=(clang --target=aarch64-linux-gnu -O3 -std=gnu11 -march=armv8.2-a+dotprod+i8mm+fp16 -S -w -isystem /usr/aarch64-linux-gnu/include)
if [ -d "$lcpp/ggml/src/ggml-cpu" ]; then
  inc=(-I"$lcpp/ggml/include" -I"$lcpp/ggml/src" -I"$lcpp/ggml/src/ggml-cpu" -DGGML_USE_CPU_REPACK)
  "${cc[@]}" "${inc[@]}" -o "$out/lcpp-quants.s" "$lcpp/ggml/src/ggml-cpu/arch/arm/quants.c"
  for f in q4_0_q8_0 q8_0_q8_0 iq4_nl_q8_0 q4_K_q8_K q5_K_q8_K q6_K_q8_K iq4_xs_q8_K; do
    loops "$out/lcpp-quants.s" "ggml_vec_dot_$f"
  done
  "${cxx[@]}" "${inc[@]}" -o "$out/lcpp-repack.s" "$lcpp/ggml/src/ggml-cpu/arch/arm/repack.cpp"
  for f in q4_0_4x4_q8_0 q4_0_4x8_q8_0 q8_0_4x4_q8_0 iq4_nl_4x4_q8_0 q4_K_8x4_q8_K q5_K_8x4_q8_K q6_K_8x4_q8_K; do
    loops "$out/lcpp-repack.s" "ggml_gemv_$f"
  done
  # its prefill gemms (4 tokens a tile; the 4x8 and 8x8 ones are SMMLA)
  for f in q4_0_4x8_q8_0 q8_0_4x8_q8_0 iq4_nl_4x4_q8_0 q4_K_8x8_q8_K; do
    loops "$out/lcpp-repack.s" "ggml_gemm_$f"
  done
fi

# ik_llama.cpp: its interleaved (_R4/_R8) kernels for one token; templates,
# so the names are matched by prefix after demangling.
if [ -d "$ik/ggml/src/iqk" ]; then
  inc=(-I"$ik/ggml/include" -I"$ik/ggml/src" -I"$ik/ggml/src/iqk" -DGGML_USE_IQK_MULMAT)
  for f in legacy_quants kquants; do
    "${cxx[@]}" "${inc[@]}" -o "$out/ik-$f.s" "$ik/ggml/src/iqk/iqk_gemm_$f.cpp" || echo "ik $f: not compiled" >&2
  done
  for s in "$out"/ik-*.s; do
    # the single-token (nrc_y = 1) and 4-token (prefill) instantiations of
    # the _r4/_r8 kernels (SDOT on ARM at every nrc_y)
    grep -oE '^_Z[A-Za-z0-9_]+:' "$s" | tr -d : | while read -r sym; do
      name=$(echo "$sym" | c++filt)
      case "$name" in
        *mul_mat_q*_r[48]_q8_*\<[14]\>*|*mul_mat_iq4_*_r[48]_q8_*\<[14]\>*|*mul_mat_qx_r[48]_q8_0*,\ [14]\>*) echo "== $name"; loops "$s" "$sym" ;;
      esac
    done
  done
fi
