// The codebook formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M),
// the ternary ones (TQ1_0, TQ2_0) and MXFP4 against llama.cpp itself
// (node-llama-cpp 3.21.1's prebuilt libraries):
//
//  1. Blocks: ggml's dequantize_row_* and ours on random blocks of every
//     type (every index, sign and scale code) give identical floats
//     (tests/tools/ggml_formats.c dequant).
//  2. Models: llama.cpp's quantizer (llama_model_quantize, --pure, a flat
//     importance matrix for the types that need one) writes each fixture in
//     each type; no such files are committed, they are made here.  Both
//     engines evaluate the same tokens on the very file, and at every
//     position our log-softmax must be within the tolerance of llama.cpp's,
//     our top-1 llama.cpp's wherever its top-1/top-2 gap exceeds twice the
//     tolerance: the standard of test_logits and families.test.mjs.  Ours is
//     run with every kernel table this CPU has (PLM_KERNELS), so the SIMD
//     dot products meet the oracle too, not only the reference.
//
// Tolerance 0.15 in log-probabilities, as test_logits gives every other
// quantized format (activations are quantized to Q8_K / Q8_0 as llama.cpp
// does; an int8 rounding of a last-bit difference can flip).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SHARED, BIN, pocketlm, llama, llamaLogProbs, logSoftmax, top2, check, finish } from "./lib.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const DUMP = process.env.PLM_DUMP_LOGITS_BIN ?? path.join(path.dirname(BIN), "dump_logits");
const TOOL = path.join(path.dirname(BIN), "ggml_formats");
const BINS = path.join(here, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
const TOL = 0.15;

// llama.cpp's file type numbers (llama.h's LLAMA_FTYPE_MOSTLY_*) whose
// default tensor type is each format; with --pure every matrix gets it.
// (The IQ2_S tensor type is file type IQ2_M's, file type IQ2_S's is IQ2_XS.)
const types = [
  { name: "IQ2_XXS", ftype: 19 }, { name: "IQ2_XS", ftype: 20 }, { name: "IQ2_S", ftype: 29 },
  { name: "IQ3_XXS", ftype: 23 }, { name: "IQ3_S", ftype: 26 }, { name: "IQ1_S", ftype: 24 },
  { name: "IQ1_M", ftype: 31 }, { name: "TQ1_0", ftype: 36 }, { name: "TQ2_0", ftype: 37 },
  { name: "MXFP4", ftype: 38 },
];
const only = process.env.PLM_IQ_TYPES?.split(",");
const fixtures = ["fixture-llama-f16", "fixture-qwen2-f16"];

if (process.arch !== "x64" || !existsSync(BINS)) {
  console.log(`iq_formats: llama.cpp's x64 libraries are not installed (${BINS}); nothing to compare with`);
  process.exit(0);
}
const lib = (re) => readdirSync(BINS).filter((f) => re.test(f)).map((f) => path.join(BINS, f))[0];
const env = { ...process.env, LD_LIBRARY_PATH: BINS + (process.env.LD_LIBRARY_PATH ? ":" + process.env.LD_LIBRARY_PATH : "") };

// 1. blocks
{
  const r = spawnSync(TOOL, ["dequant", lib(/^libggml-base\.so$/)], { encoding: "utf8", env });
  process.stdout.write(r.stdout ?? "");
  check(r.status === 0, `ggml_formats dequant: ${r.error?.message ?? r.stderr}`);
}

// 2. models
const dir = mkdtempSync(path.join(os.tmpdir(), "plm-iq-"));
const l = await llama();

// Every x86 kernel table; PLM_KERNELS refuses one this CPU cannot run, and
// that table is skipped.
const tables = ["ref", "avx2", "avx512", "avxvnni"];

const theirs = (file, tokens) => llamaLogProbs(l, file, tokens, 128);

function ours(file, tokens, nv, table) {
  const out = path.join(dir, "ours.f32");
  const r = spawnSync(DUMP, [file, out, ...tokens.map(String)], { encoding: "utf8", env: { ...process.env, PLM_KERNELS: table } });
  if (r.error || r.status !== 0) return { err: r.error?.message ?? r.stderr };
  const buf = readFileSync(out);
  const all = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  if (all.length !== tokens.length * nv) return { err: `${all.length} logits, want ${tokens.length * nv}` };
  const rows = [];
  for (let i = 0; i < tokens.length; i++) rows.push(logSoftmax(all.subarray(i * nv, (i + 1) * nv)));
  return { rows };
}

try {
  const tokens = readFileSync(path.join(SHARED, "models/expected/fixture-llama-f16.tokens"), "utf8").trim().split(/\s+/).map(Number);
  const libllama = lib(/^libllama.*\.so$/);
  for (const fx of fixtures) {
    for (const t of types) {
      if (only && !only.includes(t.name)) continue;
      const file = path.join(dir, `${fx}-pure-${t.name}.gguf`);
      const q = spawnSync(TOOL, ["quantize", libllama, path.join(SHARED, `models/fixtures/${fx}.gguf`), file, String(t.ftype)],
                          { encoding: "utf8", env });
      check(q.status === 0, `${fx} ${t.name}: llama.cpp's quantizer: ${q.error?.message ?? q.stderr}`);
      if (q.status !== 0) continue;
      const info = pocketlm(["inspect", file]).stdout;
      const qtype = /blk\.0\.attn_q\.weight\s+(\S+)/.exec(info)?.[1];
      check(qtype === t.name, `${fx} ${t.name}: llama.cpp wrote blk.0.attn_q.weight as ${qtype}`);
      const want = await theirs(file, tokens);
      const nv = want[0].length;
      for (const table of tables) {
        const got = ours(file, tokens, nv, table);
        if (got.err && /kernel|PLM_KERNELS/i.test(got.err) && table !== "ref") continue;  // not on this CPU
        check(!got.err, `${fx} ${t.name} ${table}: dump_logits: ${got.err}`);
        if (got.err) continue;
        let worst = 0, checked = 0, flips = 0;
        for (let i = 0; i < tokens.length; i++) {
          for (let j = 0; j < nv; j++) worst = Math.max(worst, Math.abs(got.rows[i][j] - want[i][j]));
          const [top, gap] = top2(want[i]);
          if (gap > 2 * TOL) {
            checked++;
            if (top2(got.rows[i])[0] !== top) flips++;
          }
        }
        console.log(`${fx} pure ${t.name.padEnd(7)} ${table.padEnd(7)}: max |dlogp| ${worst.toFixed(4)} (tol ${TOL}), ` +
                    `top-1 agrees ${checked - flips}/${checked} clear positions of ${tokens.length}`);
        check(worst <= TOL, `${fx} ${t.name} ${table}: max log-prob difference ${worst} > ${TOL}`);
        check(flips === 0, `${fx} ${t.name} ${table}: top-1 differs at ${flips} of ${checked} clear positions`);
      }
      rmSync(file, { force: true });
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
finish();
