#!/usr/bin/env node
// llama.cpp's side of bench/compare-llamacpp.sh, through node-llama-cpp (the
// prebuilt CPU binary pinned in tests/oracle/package.json).
//
//   node bench/llamacpp-bench.mjs -m MODEL.gguf [-p 512] [-n 128] [-t 2] [-b 512] [-r 1] [-fa 0|1]
//       prints a JSON array shaped like llama-bench's: one pp and one tg result
//   node bench/llamacpp-bench.mjs --summarize OURS.jsonl LLAMA.jsonl [LABEL]
//       reads the per-round results both sides wrote (one JSON array per line)
//       and prints medians of t/s and the ratios ours / theirs (LABEL names
//       the peer, default llama.cpp)
//
// pp: evaluate p random tokens into an empty sequence, timed.
// tg: generate n tokens greedily one at a time (after the first, which also
//     evaluates the one-token prompt), timed.
// Each test is preceded by an untimed warm-up, like pocketlm bench's.
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const o = { p: 512, n: 128, t: os.availableParallelism?.() ?? os.cpus().length, b: 512, r: 1, fa: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = argv[i + 1];
    if (a === "--summarize") {
      o.summarize = [v, argv[i + 2], argv[i + 3] && !argv[i + 3].startsWith("-") ? argv[i + 3] : "llama.cpp"];
      i += o.summarize[2] === argv[i + 3] ? 3 : 2;
    }
    else if (a === "-m") { o.m = v; i++; }
    else if (["-p", "-n", "-t", "-b", "-r"].includes(a)) { o[a[1]] = Number(v); i++; }
    else if (a === "-fa") { o.fa = Number(v); i++; }
    else if (a === "-h" || a === "--help") { o.help = true; }
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

const median = (a) => {
  const s = [...a].sort((x, y) => x - y), k = s.length >> 1;
  return s.length % 2 ? s[k] : (s[k - 1] + s[k]) / 2;
};

function summarize(oursPath, llamaPath, label = "llama.cpp") {
  const read = (p) => readFileSync(p, "utf8").split("\n").filter((l) => l.trim()).flatMap((l) => JSON.parse(l));
  const ours = read(oursPath), theirs = read(llamaPath);
  const key = (r) => (r.n_prompt ? `pp${r.n_prompt}` : `tg${r.n_gen}`);
  const tests = [...new Set([...ours, ...theirs].map(key))];
  const rows = [];
  for (const t of tests) {
    const a = ours.filter((r) => key(r) === t).flatMap((r) => r.samples_ts);
    const b = theirs.filter((r) => key(r) === t).flatMap((r) => r.samples_ts);
    if (!a.length || !b.length) continue;
    const ma = median(a), mb = median(b);
    rows.push({ test: t, ours: ma, llama: mb, ratio: ma / mb, n: Math.min(a.length, b.length) });
  }
  const model = ours[0]?.model_type ?? "?", threads = ours[0]?.n_threads ?? "?";
  console.log(`model ${ours[0]?.model_filename} (${model}), ${threads} threads, ` +
              `n_batch ${ours[0]?.n_batch}, flash attention ${ours[0]?.flash_attn ? 1 : 0}; medians of per-round t/s`);
  console.log(`| test | pocketlm t/s | ${label} t/s | ours / ${label} | rounds |`);
  console.log("| ---- | -----------: | ------------: | ---------------: | -----: |");
  for (const r of rows)
    console.log(`| ${r.test} | ${r.ours.toFixed(2)} | ${r.llama.toFixed(2)} | ${r.ratio.toFixed(3)} | ${r.n} |`);
}

async function bench(o) {
  const mod = path.join(here, "../tests/oracle/node_modules/node-llama-cpp/dist/index.js");
  const { getLlama } = await import(pathToFileURL(mod).href);
  // maxThreads 0: the context's `threads` is then exactly the thread count used.
  const llama = await getLlama({ gpu: false, build: "never", logLevel: "error", maxThreads: 0 });
  const model = await llama.loadModel({ modelPath: o.m, gpuLayers: 0 });
  let nVocab = 0;
  for (const _ of model.iterateAllTokens()) nVocab++;
  const nParams = (model.fileInfo.tensorInfo ?? []).reduce(
    (s, t) => s + t.dimensions.reduce((p, d) => p * Number(d), 1), 0);
  const context = await model.createContext({
    contextSize: Math.max(o.p, o.n + 1) + 16,
    batchSize: o.b,
    threads: o.t,
    sequences: 1,
    flashAttention: o.fa === 1,
  });
  const seq = context.getSequence();
  let rng = 0x2545f491;
  const randomTokens = (k) => Array.from({ length: k }, () => {
    rng ^= rng << 13; rng ^= rng >>> 17; rng ^= rng << 5; rng >>>= 0;
    return rng % nVocab;
  });
  const bos = model.tokens.bos ?? 1;

  async function pp(k) {
    await seq.clearHistory();
    const toks = randomTokens(k);
    const t0 = process.hrtime.bigint();
    await seq.evaluateWithoutGeneratingNewTokens(toks);
    return Number(process.hrtime.bigint() - t0);
  }
  async function tg(k) {
    await seq.clearHistory();
    const it = seq.evaluate([bos], { temperature: 0, yieldEogToken: true });
    await it.next(); // evaluates the prompt token and samples the first
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < k; i++) await it.next(); // each: decode the last token, sample the next
    const ns = Number(process.hrtime.bigint() - t0);
    await it.return();
    return ns;
  }

  const results = [];
  const base = {
    build_commit: `node-llama-cpp-${llama.buildType ?? ""}`.replace(/-$/, ""), build_number: 0,
    cpu_info: os.cpus()[0]?.model ?? "", gpu_info: "", backends: "CPU",
    model_filename: o.m, model_type: model.typeDescription, model_size: model.size, model_n_params: nParams,
    n_batch: o.b, n_ubatch: o.b, n_threads: o.t, type_k: "f16", type_v: "f16", n_gpu_layers: 0,
    use_mmap: true, flash_attn: o.fa === 1, n_depth: 0,
  };
  for (const [kind, k] of [["pp", o.p], ["tg", o.n]]) {
    if (!k) continue;
    const run = kind === "pp" ? pp : tg;
    await run(Math.min(k, kind === "pp" ? 32 : 4)); // warm-up
    const test_time = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const samples_ns = [];
    for (let i = 0; i < o.r; i++) samples_ns.push(await run(k));
    const samples_ts = samples_ns.map((ns) => (k * 1e9) / ns);
    const mean = (a) => a.reduce((s, x) => s + x, 0) / a.length;
    const sd = (a) => a.length < 2 ? 0 : Math.sqrt(a.reduce((s, x) => s + (x - mean(a)) ** 2, 0) / (a.length - 1));
    results.push({ ...base, n_prompt: kind === "pp" ? k : 0, n_gen: kind === "tg" ? k : 0, test_time,
                   avg_ns: Math.round(mean(samples_ns)), stddev_ns: Math.round(sd(samples_ns)),
                   avg_ts: mean(samples_ts), stddev_ts: sd(samples_ts), samples_ns, samples_ts });
  }
  console.log(JSON.stringify(results));
  await context.dispose();
  await model.dispose();
}

const o = parseArgs(process.argv.slice(2));
if (o.help || (!o.summarize && !o.m)) {
  console.log("usage: node bench/llamacpp-bench.mjs -m MODEL.gguf [-p 512] [-n 128] [-t N] [-b 512] [-r 1]\n" +
              "       node bench/llamacpp-bench.mjs --summarize OURS.jsonl LLAMA.jsonl");
  process.exit(o.help ? 0 : 1);
}
if (o.summarize) summarize(...o.summarize);
else await bench(o);
