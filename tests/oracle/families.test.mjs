// Every architecture family against llama.cpp (node-llama-cpp 3.21.1) on the
// very file we run: `pocketlm synth` writes a tiny random-weight model of the
// family's test shape (F32 and F16), `pocketlm quantize` re-encodes the F32
// one as Q8_0 and Q4_K_M, and both engines evaluate the same tokens.  At
// every position our log-softmax must be within the format's tolerance of
// llama.cpp's (max absolute difference; log-probabilities, because
// node-llama-cpp gives probabilities, so logits up to a constant), and our
// top-1 must be llama.cpp's wherever llama.cpp's top-1/top-2 gap exceeds
// twice the tolerance: the standard of test_logits.
//
// For the Mixture-of-Experts shapes, llama.cpp's own quantizer must also
// write the very bytes `pocketlm quantize` wrote (bench/quantize-vs-llamacpp.sh:
// 3-D expert tensors, the router left in F32, the 8-expert rules).
//
// Ours runs twice: the tokens as one batch (prefill: a MoE groups them by
// expert) and one at a time (decode).
//
// PLM_FAMILIES=shape,shape... runs only those synth shapes, PLM_FAMILY_FORMATS=
// F32,Q8_0,... only those formats; PLM_FAMILY_QUANTIZER=0 skips the
// quantizer comparison (scripts/test-arm.sh runs a subset this way, with
// PLM_DUMP_LOGITS_BIN running the arm64 dump_logits under qemu).
//
// Runs: every shape is evaluated in one batch with a 64-token context; some
// are evaluated again where their own choices show (`runs` below): the
// windowed shapes (gemma2/3: window 8, prompt of ~20 tokens) in batches of
// 3, so that each window wraps around its ring of cells and its mirror (and
// gemma3 with a 32-token context, too short for a ring to save memory: the
// window still applies), and
// LongRoPE (test-phi3-longrope-tiny, original context 512) with a 1024-token
// context, where llama.cpp switches to rope_factors_long (at 64, which it
// pads to 256, it keeps rope_factors_short).  And a long prompt (1100
// tokens, `long` runs) decoded one token at a time, so that the global
// layers' keys (512 and more) go in runs over the threads (forward.c,
// attend_split): gemma3 (2 KV heads) and llama3.
//
// Context shift (`shift` runs: after 40 tokens of a 58-token list, drop 18
// after the first 4, then the rest, in batches of 4 so that the windowed
// layers keep rings): llama.cpp shifts only with a full-size SWA cache
// (swaFullCache; with its default small one it refuses), and our ring's
// rotation must give what that gives.  Also a full-cache family, as a
// control.  In F32 and Q8_0 (the cache is F16 in every format).
//
// Tolerances as test_logits: 0.01 for F32/F16 (summation order only); 0.1
// for Q8_0 and 0.15 for Q4_K_M, where activations are quantized too and an
// int8 rounding of a last-bit difference can flip.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { SHARED, BIN, pocketlm, llama, llamaLogProbs, logSoftmax, top2, check, finish } from "./lib.mjs";

const DUMP = process.env.PLM_DUMP_LOGITS_BIN ?? path.join(path.dirname(BIN), "dump_logits");
const vocab = path.join(SHARED, "models/stories260K.gguf");
// llama.cpp looks up Phi-3's own special tokens when it loads a phi3 file.
const vocabOf = (shape) => shape.includes("phi3") ? path.join(SHARED, "vocab/ggml-vocab-phi-3.gguf") : vocab;
const dir = mkdtempSync(path.join(os.tmpdir(), "plm-families-"));
const l = await llama();

// Shapes: `pocketlm synth --list`; each exercises its family's own steps.
const families = (process.env.PLM_FAMILIES ?? "test-llama-tiny,test-llama3-tiny,test-qwen2-tiny,test-qwen3-tiny,test-granite-tiny,test-phi3-tiny,test-mistral-tiny,test-phi3-longrope-tiny,test-gemma2-tiny,test-gemma3-tiny,test-gemma3-pattern-tiny,test-qwen3moe-tiny,test-mixtral-tiny").split(",");
const SHIFT = { ctx: 64, batch: 4, shift: [40, 4, 18], formats: ["F32", "Q8_0"] };
const LONG = { ctx: 1152, batch: 1, long: true, formats: ["F32", "Q8_0"] };
const runs = {
  "test-llama3-tiny": [{ ctx: 64 }, SHIFT, LONG],
  "test-gemma2-tiny": [{ ctx: 64 }, { ctx: 64, batch: 3 }, SHIFT],
  "test-gemma3-tiny": [{ ctx: 64 }, { ctx: 64, batch: 3 }, { ctx: 32 }, SHIFT, LONG],  // 32: a window but no ring
  "test-gemma3-pattern-tiny": [{ ctx: 64 }, { ctx: 64, batch: 3 }],
  "test-phi3-longrope-tiny": [{ ctx: 64 }, { ctx: 1024 }],
};
// Every shape also one token at a time (decode; a MoE groups a batch by expert).
// A MoE's quantized files also with the matrices repacked, experts too
// (quant/repack.h; the bytes dump_logits reports must cover the experts),
// where the kernel table has interleaved kernels (PLM_FAMILY_REPACK=0 says
// it has none: ARM's plain neon table, in scripts/test-arm.sh).
const REPACKED = [{ ctx: 64, repack: true, formats: ["Q8_0", "Q4_K_M"] },
                  { ctx: 64, batch: 1, repack: true, formats: ["Q8_0", "Q4_K_M"] }];
const REPACKS = process.env.PLM_FAMILY_REPACK !== "0" && !["neon", "ref"].includes(process.env.PLM_KERNELS ?? "");
const runsOf = (shape) => [...(runs[shape] ?? [{ ctx: 64 }]), { ctx: 64, batch: 1 },
                           ...(MOE.has(shape) && REPACKS ? REPACKED : [])];
// The gemma3 shapes are deep enough (7 and 6 layers) that a global layer
// (5; 2 and 5 with the pattern 3) reads past the 8-token window, in every
// format.  Their quantized files get 2.5 times the tolerance: gemma's
// post-norms (weight 1 on a small block output) amplify the last-bit
// differences that flip an activation's int8 rounding, layer after layer
// (measured: 0.12-0.16 for Q8_0, 0.17-0.23 for Q4_K_M; our own batched and
// one-at-a-time evaluations differ by as much).  A wrong window or pattern
// moves them by 3.1-3.3 (the pattern shape evaluated as the default 6), so
// the looser bound still tells right from wrong.
const quantSlack = { "test-gemma3-tiny": 2.5, "test-gemma3-pattern-tiny": 2.5 };
const onlyFormats = process.env.PLM_FAMILY_FORMATS?.split(",");
const formats = [
  { name: "F32", tol: 0.01 },
  { name: "F16", tol: 0.01 },
  { name: "Q8_0", tol: 0.1 },
  { name: "Q4_K_M", tol: 0.15 },
].filter((f) => !onlyFormats || onlyFormats.includes(f.name));

const MOE = new Set(["test-qwen3moe-tiny", "test-mixtral-tiny"]);
const QUANT_VS = path.join(path.dirname(new URL(import.meta.url).pathname), "../../bench/quantize-vs-llamacpp.sh");

// llama.cpp's quantizer against ours on one file and type (exit 0: identical).
function sameQuantization(shape, file, type) {
  const r = spawnSync(QUANT_VS, [file, type, "-t", "2", "-o", dir],
                      { encoding: "utf8", env: { ...process.env, BUILD: path.dirname(BIN) } });
  const last = (r.stdout ?? "").trim().split("\n").pop();
  console.log(`${shape} quantize ${type}: ${last}`);
  check(r.status === 0, `${shape} quantize ${type}: differs from llama.cpp's: ${last} ${r.stderr ?? ""}`);
}

// The files of one shape: F32 and F16 from synth, the others quantized from F32.
function makeFiles(shape) {
  const files = {};
  const made = formats.some((f) => f.name === "F32") ? formats : [{ name: "F32" }, ...formats];
  for (const f of made) {
    const out = path.join(dir, `${shape}-${f.name}.gguf`);
    let r;
    const synth = (o, extra) => pocketlm(["synth", shape, "--vocab", vocabOf(shape), "-o", o, "--seed", "11", ...extra]);
    if (f.name === "F32" || f.name === "F16") {
      r = synth(out, f.name === "F32" ? ["--f32"] : []);
    } else {
      r = pocketlm(["quantize", "-t", "2", files.F32, out, f.name]);
    }
    check(r.status === 0, `${shape} ${f.name}: ${r.stderr}`);
    if (r.status === 0) files[f.name] = out;
  }
  return files;
}

// llama.cpp's log-probabilities at every position of `tokens`.
const theirs = (file, tokens, ctx) => llamaLogProbs(l, file, tokens, ctx);

// ... with a context shift after `at` tokens: llama_memory_seq_rm of the
// `drop` after the first `keep`, seq_add of the rest (node-llama-cpp's
// eraseContextTokenRanges), in a context whose SWA cache is full-size.
async function theirsShifted(file, tokens, ctx, [at, keep, drop]) {
  const model = await l.loadModel({ modelPath: file });
  const context = await model.createContext({ contextSize: ctx, flashAttention: false, threads: 1, swaFullCache: true });
  const seq = context.getSequence();
  const logProbs = async (toks) => (await seq.controlledEvaluate(toks.map((t) => [t, { generateNext: { probabilities: true } }])))
    .map((r) => {
      const lp = new Float64Array(r.next.probabilities.size).fill(-Infinity);
      for (const [tok, p] of r.next.probabilities) lp[tok] = Math.log(p);
      return lp;
    });
  const before = await logProbs(tokens.slice(0, at));
  await seq.eraseContextTokenRanges([{ start: keep, end: keep + drop }]);
  const shifted = seq.nextTokenIndex === at - drop;
  const after = await logProbs(tokens.slice(at));
  await context.dispose();
  await model.dispose();
  check(shifted, `llama.cpp's sequence after the shift: ${seq.nextTokenIndex} tokens`);
  return [...before, ...after];
}

// Our log-probabilities: dump_logits evaluates the tokens in one batch or in batches of run.batch.
function dumpOurs(file, tokens, nv, run) {
  const out = path.join(dir, "ours.f32");
  const opts = ["-c", String(run.ctx), ...(run.batch ? ["-b", String(run.batch)] : []),
                ...(run.shift ? ["-s", run.shift.join(",")] : []), ...(run.repack ? ["-r"] : [])];
  const r = spawnSync(DUMP, [file, out, ...opts, ...tokens.map(String)], { encoding: "utf8" });
  if (r.error || r.status !== 0) return { err: r.error?.message ?? r.stderr };
  if (run.repack) {  // most of a MoE's bytes are its experts: repacked, they are most of the file
    const bytes = Number(/repacked (\d+) bytes/.exec(r.stderr)?.[1] ?? 0);
    if (bytes < 0.5 * statSync(file).size) return { err: `only ${bytes} of ${statSync(file).size} bytes repacked` };
  }
  const buf = readFileSync(out);
  const all = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  if (all.length !== tokens.length * nv) return { err: `${all.length} logits, want ${tokens.length * nv}` };
  const rows = [];
  for (let i = 0; i < tokens.length; i++) rows.push(logSoftmax(all.subarray(i * nv, (i + 1) * nv)));
  return { rows };
}

const prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside";
try {
  const m0 = await l.loadModel({ modelPath: vocab });
  const tokens = [m0.tokens.bos ?? 1, ...m0.tokenize(prompt)];
  const body = tokens.slice(1);
  const longTokens = [...tokens, ...body, ...body, ...body].slice(0, 58);  // for the shift runs
  const longPrompt = [...tokens];  // for the long runs
  while (longPrompt.length < 1100) longPrompt.push(...body);
  longPrompt.length = 1100;
  await m0.dispose();
  for (const shape of families) {
    const files = makeFiles(shape);
    if (MOE.has(shape) && files.F32 && process.arch === "x64" && process.env.PLM_FAMILY_QUANTIZER !== "0")
      for (const type of ["Q4_K_M", "Q3_K_M"]) sameQuantization(shape, files.F32, type);
    let clear = 0;
    for (const format of formats) for (const run of runsOf(shape)) {
      if (!files[format.name] || (run.formats && !run.formats.includes(format.name))) continue;
      const quantized = format.name !== "F32" && format.name !== "F16";
      const f = { ...format, tol: format.tol * (quantized ? quantSlack[shape] ?? 1 : 1) };
      const toks = run.shift ? longTokens : run.long ? longPrompt : tokens;
      const want = run.shift ? await theirsShifted(files[f.name], toks, run.ctx, run.shift)
                             : await theirs(files[f.name], toks, run.ctx);
      const nv = want[0].length;
      const got = dumpOurs(files[f.name], toks, nv, run);
      const what = `${shape} ${f.name} (context ${run.ctx}${run.batch ? `, batches of ${run.batch}` : ""}` +
                   `${run.repack ? ", repacked" : ""}` +
                   `${run.shift ? `, shift ${run.shift.join(",")}` : ""})`;
      check(!got.err, `${what}: dump_logits: ${got.err}`);
      if (got.err) continue;
      let worst = 0, checked = 0, flips = 0;
      for (let i = 0; i < toks.length; i++) {
        for (let j = 0; j < nv; j++) worst = Math.max(worst, Math.abs(got.rows[i][j] - want[i][j]));
        const [t, gap] = top2(want[i]);
        if (gap > 2 * f.tol) {
          checked++;
          if (top2(got.rows[i])[0] !== t) flips++;
        }
      }
      console.log(`${what}: max |dlogp| ${worst.toFixed(4)} (tol ${f.tol}), top-1 agrees ` +
                  `${checked - flips}/${checked} clear positions of ${toks.length}`);
      check(worst <= f.tol, `${what}: max log-prob difference ${worst} > ${f.tol}`);
      check(flips === 0, `${what}: top-1 differs at ${flips} of ${checked} clear positions`);
      clear += checked;
    }
    // An untied output of N(0, 0.02) (test-llama-tiny) spreads the logits
    // little: its quantized formats may have no clear position, but the
    // shape as a whole must.
    check(clear > 0, `${shape}: no position with a clear top-1 in any format`);
    for (const p of Object.values(files)) rmSync(p, { force: true });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
finish();
