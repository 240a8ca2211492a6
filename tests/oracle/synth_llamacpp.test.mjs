// `pocketlm synth` output must load in llama.cpp (node-llama-cpp 3.21.1):
// llama.cpp checks every tensor's name and shape against the architecture and
// refuses missing or extra tensors, so a load plus a few evaluated tokens is an
// independent check of the names, shapes, types and hyperparameter keys.
//
// PLM_ORACLE_BIG=1 also synthesizes tinyllama-1.1b (2.2 GB F16) with the
// 32000-token llama-spm vocabulary and checks its parameter count is exactly
// TinyLlama's 1,100,048,384.
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { SHARED, pocketlm, llama, check, finish } from "./lib.mjs";

const vocab = path.join(SHARED, "models/stories260K.gguf");
const dir = mkdtempSync(path.join(os.tmpdir(), "plm-synth-oracle-"));
const l = await llama();

const sha = (p) => createHash("sha256").update(readFileSync(p)).digest("hex");

async function checkShape({ shape, arch, layers, embd, heads, kv, ff, ctx, tied, bias, f32, vocabPath,
                            nVocab, params }) {
  const out = path.join(dir, `${shape}${f32 ? "-f32" : ""}.gguf`);
  const args = ["synth", shape, "--vocab", vocabPath, "-o", out, "--seed", "7"];
  if (f32) args.push("--f32");
  const r = pocketlm(args);
  check(r.status === 0, `${shape}: pocketlm synth exited ${r.status}: ${r.stderr}`);
  if (r.status !== 0) return;

  let model;
  try {
    model = await l.loadModel({ modelPath: out });
  } catch (e) {
    check(false, `${shape}: llama.cpp refused the file: ${e.message}`);
    return;
  }
  check(true, `${shape}: loaded`);
  const md = model.fileInfo.metadata;
  const a = md[arch] ?? {};
  check(md.general.architecture === arch, `${shape}: architecture ${md.general.architecture}`);
  check(md.general.file_type === (f32 ? 0 : 1), `${shape}: file_type ${md.general.file_type}`);
  check(a.block_count === layers && a.embedding_length === embd && a.feed_forward_length === ff &&
        a.context_length === ctx, `${shape}: sizes ${JSON.stringify(a)}`);
  check(a.attention?.head_count === heads && a.attention?.head_count_kv === kv,
        `${shape}: heads ${JSON.stringify(a.attention)}`);
  check(a.rope?.dimension_count === embd / heads, `${shape}: rope.dimension_count`);
  check(model.trainContextSize === ctx, `${shape}: trainContextSize ${model.trainContextSize}`);
  const tensors = model.fileInfo.tensorInfo ?? [];
  const want = 2 + (tied ? 0 : 1) + layers * (9 + (bias ? 3 : 0));
  check(tensors.length === want, `${shape}: ${tensors.length} tensors, want ${want}`);
  const embdInfo = tensors.find((t) => t.name === "token_embd.weight");
  check(embdInfo && Number(embdInfo.dimensions[0]) === embd && Number(embdInfo.dimensions[1]) === nVocab,
        `${shape}: token_embd dims ${embdInfo?.dimensions}`);
  if (params !== undefined) {
    const n = tensors.reduce((s, t) => s + t.dimensions.reduce((p, d) => p * Number(d), 1), 0);
    check(n === params, `${shape}: ${n} parameters, want ${params}`);
  }

  // Evaluate a few tokens: the distribution must be finite and complete.
  const context = await model.createContext({ contextSize: 64, threads: 1 });
  const seq = context.getSequence();
  const input = [model.tokens.bos ?? 1, ...model.tokenize("Once upon a time")];
  let n = 0, ok = true;
  for await (const res of seq.evaluateWithMetadata(input, { probabilities: true }, { temperature: 0 })) {
    let sum = 0;
    for (const p of res.probabilities.values()) {
      if (!Number.isFinite(p)) ok = false;
      sum += p;
    }
    if (res.probabilities.size !== nVocab || Math.abs(sum - 1) > 1e-3) ok = false;
    if (++n === 4) break;
  }
  check(n === 4 && ok, `${shape}: evaluation gave ${n} tokens, finite distributions: ${ok}`);
  await context.dispose();
  await model.dispose();

  // Same seed, same bytes.
  if (!params) {
    const again = path.join(dir, "again.gguf");
    const r2 = pocketlm(["synth", shape, "--vocab", vocabPath, "-o", again, "--seed", "7",
                         ...(f32 ? ["--f32"] : [])]);
    check(r2.status === 0 && sha(out) === sha(again), `${shape}: not reproducible`);
    rmSync(again, { force: true });
  }
  rmSync(out, { force: true });
}

const tiny = { layers: 2, embd: 64, heads: 4, kv: 2, ff: 128, ctx: 256, vocabPath: vocab, nVocab: 512 };
try {
  await checkShape({ shape: "test-llama-tiny", arch: "llama", tied: false, bias: false, ...tiny });
  await checkShape({ shape: "test-llama-tiny", arch: "llama", tied: false, bias: false, f32: true, ...tiny });
  await checkShape({ shape: "test-qwen2-tiny", arch: "qwen2", tied: true, bias: true, ...tiny });
  await checkShape({ shape: "test-qwen2-tiny", arch: "qwen2", tied: true, bias: true, f32: true, ...tiny });
  if (process.env.PLM_ORACLE_BIG === "1") {
    await checkShape({ shape: "tinyllama-1.1b", arch: "llama", layers: 22, embd: 2048, heads: 32, kv: 4,
                       ff: 5632, ctx: 2048, tied: false, bias: false,
                       vocabPath: path.join(SHARED, "vocab/ggml-vocab-llama-spm.gguf"), nVocab: 32000,
                       params: 1100048384 });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
finish();
