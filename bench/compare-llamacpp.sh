#!/usr/bin/env bash
# pocketlm vs llama.cpp, side by side on one file with the same threads and
# batch size.  The two run in alternating rounds (ABBA order, so neither
# always goes first) to share the machine's noise; each round is a fresh
# process on each side measuring one pp and one tg sample after a warm-up.
# Prints the medians over the rounds and the ratios ours / llama.cpp.
#
#   bench/compare-llamacpp.sh MODEL.gguf [-p 512] [-n 128] [-t THREADS] [-b 512] [-r 5] [-fa 0|1]
#                             [--repack] [--ik PATH/llama-bench] [--ik-rtr 0|1]
#
# -fa 1 runs both sides with flash attention (llama.cpp's flash_attn, our
# one-pass softmax); the default 0 runs both without.  --repack runs ours
# with row-interleaved weights.  --ik adds ik_llama.cpp's llama-bench (a
# CPU Release build, e.g. /tmp/ik-build/bin/llama-bench) as a second peer in
# the same rounds, with its run-time repack -rtr 1 unless --ik-rtr 0.
#
# llama.cpp is node-llama-cpp@3.21.1's prebuilt CPU binary (tests/oracle/,
# installed by scripts/test.sh).  POCKETLM_BIN overrides build/pocketlm.
# The raw per-round JSON (llama-bench's fields) is kept when KEEP=DIR is set.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${POCKETLM_BIN:-$root/build/pocketlm}"

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-1}"; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage 0 ;; esac
model="$1"; shift
p=512 n=128 t="" b=512 r=5 fa=0 repack="" ik="" ik_rtr=1
while [ $# -gt 0 ]; do
  case "$1" in
    -p) p="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    -t) t="$2"; shift 2 ;;
    -b) b="$2"; shift 2 ;;
    -r) r="$2"; shift 2 ;;
    -fa) fa="$2"; shift 2 ;;
    --repack) repack="--repack"; shift ;;
    --ik) ik="$2"; shift 2 ;;
    --ik-rtr) ik_rtr="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "compare-llamacpp: unknown option $1" >&2; usage ;;
  esac
done
[ -x "$bin" ] || { echo "compare-llamacpp: no pocketlm binary at $bin (build first, or set POCKETLM_BIN)" >&2; exit 1; }
[ -f "$model" ] || { echo "compare-llamacpp: no model $model" >&2; exit 1; }
[ -z "$ik" ] || [ -x "$ik" ] || { echo "compare-llamacpp: no ik_llama.cpp llama-bench at $ik" >&2; exit 1; }
[ -d "$root/tests/oracle/node_modules/node-llama-cpp" ] ||
  { echo "compare-llamacpp: run 'cd tests/oracle && npm ci' first (node-llama-cpp)" >&2; exit 1; }
if [ -z "$t" ]; then
  t="$("$bin" probe -o json --no-bandwidth | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).cpu.default_threads))')"
fi

dir="${KEEP:-$(mktemp -d)}"
mkdir -p "$dir"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
ours="$dir/pocketlm.jsonl" theirs="$dir/llamacpp.jsonl" iks="$dir/ik.jsonl"
: > "$ours"; : > "$theirs"; : > "$iks"

# Measure the bandwidth once so that every round of ours does not.
bw="$("$bin" probe -o json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).bandwidth.best_gbps))')"
echo "compare-llamacpp: $model, pp$p tg$n, $t threads, batch $b, flash attention $fa, $r rounds;" \
  "memory read bandwidth $bw GB/s" >&2

run_ours() {
  "$bin" bench -m "$model" -p "$p" -n "$n" -t "$t" -b "$b" -fa "$fa" -r 1 -o json --bandwidth "$bw" $repack |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s))))' >> "$ours"
}
run_theirs() {
  node "$root/bench/llamacpp-bench.mjs" -m "$model" -p "$p" -n "$n" -t "$t" -b "$b" -fa "$fa" -r 1 >> "$theirs"
}
run_ik() {
  [ -n "$ik" ] || return 0
  "$ik" -m "$model" -p "$p" -n "$n" -t "$t" -b "$b" -fa "$fa" -r 1 -rtr "$ik_rtr" -o json 2>/dev/null |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s))))' >> "$iks"
}
for i in $(seq 1 "$r"); do
  if [ $((i % 4)) -eq 1 ] || [ $((i % 4)) -eq 0 ]; then run_ours; run_theirs; run_ik; else run_ik; run_theirs; run_ours; fi
  echo "compare-llamacpp: round $i/$r done" >&2
done
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
node "$root/bench/llamacpp-bench.mjs" --summarize "$ours" "$theirs"
[ -z "$ik" ] || node "$root/bench/llamacpp-bench.mjs" --summarize "$ours" "$iks" "ik_llama.cpp(-rtr $ik_rtr)"
