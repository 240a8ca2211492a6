#!/bin/sh
# What an importance matrix buys: KL divergence against the unquantized model
# for Q2_K, Q4_0 and IQ4_XS quantized without and with `pocketlm imatrix`, on
# the fixtures (random weights: the imatrix has little to find) and
# stories260K (the one trained model here).  Calibration on the first half of
# tests/data/tinystories.txt, evaluation on the second half.  Prints a
# Markdown table; with --write it replaces the table in docs/QUANTIZATION.md.
#
#   bench/imatrix-kld.sh [--write]          (needs build/pocketlm)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${PLM_SHARED_DIR:-$root/../shared}
bin=$root/build/pocketlm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
text=$root/tests/data/tinystories.txt
half=$(( $(wc -c < "$text") / 2 ))
head -c $half "$text" > "$tmp/cal.txt"
tail -c +$((half + 1)) "$text" > "$tmp/eval.txt"

kld() {  # model -> "mean_kld same_top"
    "$bin" kld -m "$1" --base "$tmp/base.kld" -t 2 2>/dev/null |
        awk '/^Mean    KLD:/ {k=$3} /^Same top p:/ {s=$4} END {printf "%s %s", k, s}'
}

table() {
    echo "| model | type | bits/weight | KLD without imatrix | KLD with imatrix | same top-1 without / with |"
    echo "|---|---|---:|---:|---:|---:|"
    for m in "$shared/models/fixtures/fixture-llama-f16.gguf" "$shared/models/stories260K.gguf"; do
        name=$(basename "$m" .gguf)
        "$bin" perplexity -m "$m" -f "$tmp/eval.txt" -c 128 -t 2 --kld-save "$tmp/base.kld" > /dev/null 2>&1
        "$bin" imatrix -m "$m" -f "$tmp/cal.txt" -c 128 -t 2 -o "$tmp/im.gguf" > /dev/null 2>&1
        for t in Q2_K Q4_0 IQ4_XS; do
            bpw=$("$bin" quantize -q "$m" "$tmp/plain.gguf" $t 2>&1 | sed -n 's/.*, \([0-9.]*\) bits per weight.*/\1/p')
            "$bin" quantize -q --imatrix "$tmp/im.gguf" "$m" "$tmp/imat.gguf" $t > /dev/null 2>&1
            set -- $(kld "$tmp/plain.gguf") $(kld "$tmp/imat.gguf")
            echo "| $name | $t | $bpw | $1 | $3 | $2% / $4% |"
        done
    done
}

out=$(table)
echo "$out"
if [ "${1:-}" = "--write" ]; then
    doc=$root/docs/QUANTIZATION.md
    begin='<!-- imatrix-kld: begin (bench/imatrix-kld.sh --write) -->'
    end='<!-- imatrix-kld: end -->'
    awk -v b="$begin" -v e="$end" -v t="$out" '
        $0 == b {print; print t; skip = 1; next}
        $0 == e {skip = 0}
        !skip {print}' "$doc" > "$tmp/doc" && cp "$tmp/doc" "$doc"
fi
