#!/bin/sh
# Records the llama.cpp side of tests/test_imatrix.c into tests/data/imatrix/:
# llama-imatrix's importance matrix of fixture-llama-f16 over the tinystories
# text (GGUF and legacy .dat), ours of the same run, and the tensor hashes of
# llama-quantize --imatrix with each of them (and without one, for the rules
# of the non-K file types).  Rerun it after changing the fixtures.
#
#   scripts/record-imatrix-expected.sh LLAMA_CPP_BIN_DIR
#
# LLAMA_CPP_BIN_DIR holds llama-imatrix and llama-quantize, built from
# llama.cpp's source, e.g.
#   cmake -S llama.cpp -B lcpp-build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF
#   cmake --build lcpp-build --target llama-quantize llama-imatrix   (bin: lcpp-build/bin)
# Needs build/pocketlm and build/test_imatrix (for --hashes).
set -eu
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${PLM_SHARED_DIR:-$root/../shared}
cd "$root"
data=tests/data/imatrix
f16=$shared/models/fixtures/fixture-llama-f16.gguf
text=tests/data/tinystories.txt   # relative: it is stored in the files as the dataset
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p $data

"$bin/llama-imatrix" -m "$f16" -f $text -c 64 -b 64 --chunks 4 --no-ppl -o $data/llamacpp.imatrix.gguf
"$bin/llama-imatrix" -m "$f16" -f $text -c 64 -b 64 --chunks 4 --no-ppl --output-format dat \
    -o $data/llamacpp.imatrix.dat
build/pocketlm imatrix -m "$f16" -f $text -c 64 --chunks 4 -o $data/pocketlm.imatrix.gguf

out=$data/expected.txt
{
    echo "# IMATRIX TYPE TENSOR GGML_TYPE FNV1A64 of llama-quantize's tensor bytes, from"
    echo "# llama-quantize [--imatrix $data/IMATRIX.imatrix.gguf] fixture-llama-f16.gguf OUT TYPE"
    echo "# by scripts/record-imatrix-expected.sh, llama.cpp $("$bin/llama-imatrix" --version 2>&1 | grep -m1 version || true)"
} > $out
quantize() {  # CASE TYPE ARGS...: llama-quantize ARGS fixture OUT TYPE, hashed under CASE
    case_=$1 t=$2
    shift 2
    "$bin/llama-quantize" "$@" "$f16" "$tmp/q.gguf" "$t" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    build/test_imatrix --hashes "$tmp/q.gguf" | sed "s/^/$case_ $t /" >> $out
}
for im in llamacpp pocketlm; do
    for t in Q2_K Q3_K_S Q4_K_M Q5_K_M Q6_K Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS; do
        quantize $im $t --imatrix $data/$im.imatrix.gguf
    done
done
for t in Q4_0 Q5_0 IQ4_NL IQ4_XS Q8_0; do quantize none $t; done
# below 4 bits: the codebook types (IQ1/IQ2 and IQ3_XXS only with an imatrix), ternary, MXFP4
for t in IQ3_M IQ3_S IQ3_XS IQ3_XXS IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S TQ2_0 TQ1_0; do
    quantize llamacpp $t --imatrix $data/llamacpp.imatrix.gguf
done
for t in IQ2_XXS IQ1_M; do quantize pocketlm $t --imatrix $data/pocketlm.imatrix.gguf; done
for t in IQ3_M IQ3_S TQ2_0 TQ1_0 MXFP4_MOE; do quantize none $t; done
quantize lowbit IQ2_S --pure --imatrix $data/pocketlm.imatrix.gguf --tensor-type "attn_k=iq1_m" \
    --token-embedding-type iq3_xxs --output-tensor-type tq1_0
# llama-quantize's options (test_imatrix.c's table of cases holds the same arguments)
quantize overrides Q4_K_M --imatrix $data/llamacpp.imatrix.gguf --exclude-weights attn_q --tensor-type "ffn_down=q8_0" \
    --tensor-type "blk\.[12]\.attn_v=q5_k" --output-tensor-type q4_k --token-embedding-type q3_k
quantize include Q2_K --imatrix $data/llamacpp.imatrix.gguf --include-weights ffn_ --include-weights attn_output
quantize pure IQ4_XS --pure --imatrix $data/pocketlm.imatrix.gguf --tensor-type "attn_k=iq4_nl"
ls -l $data
