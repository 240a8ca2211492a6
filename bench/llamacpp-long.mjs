#!/usr/bin/env node
// llama.cpp's decode after a long prompt, through node-llama-cpp (the prebuilt
// CPU binary pinned in tests/oracle/package.json): the side-by-side for
// `pocketlm run -m MODEL -f PROMPT -n N -c CTX -t T --temp 0`'s "generated" rate.
//
//   node bench/llamacpp-long.mjs -m MODEL.gguf -f PROMPT.txt [-n 100] [-c 4096] [-t 2]
//                                [-ctk f16|q8_0|q4_0] [-ctv f16|q8_0|q4_0] [-fa]
//
// With -ctk / -ctv the cache is quantized as pocketlm's same options quantize
// it; llama.cpp quantizes values only with flash attention (-fa, pocketlm's
// -fa the side-by-side).
//
// The prompt is tokenized by the model (BOS first where the model has one),
// evaluated, then N tokens are generated greedily one at a time; the rate is
// timed after the first (which also evaluates the prompt), flash attention off
// unless -fa.  pp_ts is the prompt's tokens over the time to that first token.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const o = { n: 100, c: 4096, t: 2, ctk: "f16", ctv: "f16", fa: false };
for (let i = 2; i < process.argv.length; i += 2) {
  const a = process.argv[i], v = process.argv[i + 1];
  if (a === "-fa") { o.fa = true; i--; continue; }
  if (a === "-m") o.m = v;
  else if (a === "-ctk" || a === "-ctv") o[a.slice(1)] = v;
  else if (a === "-f") o.f = v;
  else if (["-n", "-c", "-t"].includes(a)) o[a[1]] = Number(v);
  else throw new Error(`unknown argument ${a}`);
}
if (!o.m || !o.f) throw new Error("usage: llamacpp-long.mjs -m MODEL.gguf -f PROMPT.txt [-n 100] [-c 4096] [-t 2]");

const mod = path.join(here, "../tests/oracle/node_modules/node-llama-cpp/dist/index.js");
const { getLlama } = await import(pathToFileURL(mod).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error", maxThreads: 0 });
const model = await llama.loadModel({ modelPath: o.m, gpuLayers: 0 });
const context = await model.createContext({ contextSize: o.c, batchSize: 512, threads: o.t, sequences: 1,
                                            flashAttention: o.fa,
                                            experimentalKvCacheKeyType: o.ctk.toUpperCase(),
                                            experimentalKvCacheValueType: o.ctv.toUpperCase() });
const seq = context.getSequence();
const text = readFileSync(o.f, "utf8");
const prompt = [...(model.tokens.bos != null ? [model.tokens.bos] : []), ...model.tokenize(text)];
const it = seq.evaluate(prompt, { temperature: 0, yieldEogToken: true });
const tp = process.hrtime.bigint();
await it.next(); // the prompt, and the first token
const t0 = process.hrtime.bigint();
const pp = prompt.length / (Number(t0 - tp) / 1e9); // as pocketlm run's "prompt" rate, plus one sampling step
for (let i = 1; i < o.n; i++) await it.next();
const s = Number(process.hrtime.bigint() - t0) / 1e9;
await it.return();
console.log(JSON.stringify({ model: path.basename(o.m), prompt_tokens: prompt.length, generated: o.n,
                             cache: `${o.ctk}/${o.ctv}`, flash: o.fa, pp_ts: pp, tg_ts: (o.n - 1) / s }));
