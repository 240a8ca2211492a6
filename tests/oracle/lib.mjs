// Shared helpers for the oracle tests: run the pocketlm binary, load llama.cpp.
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const SHARED = process.env.PLM_SHARED_DIR ?? path.join(here, "../../../shared");
export const BIN = process.env.POCKETLM_BIN ?? path.join(here, "../../build/pocketlm");

export function pocketlm(args, opts = {}) {
  const r = spawnSync(BIN, args, { encoding: "utf8", maxBuffer: 1 << 28, ...opts });
  if (r.error) throw r.error;
  return r;
}

let llamaPromise;
export async function llama() {
  const { getLlama } = await import("node-llama-cpp");
  llamaPromise ??= getLlama({ gpu: false, build: "never", logLevel: "error" });
  return llamaPromise;
}

// A tiny check harness that ends with the "N passed, N failed" line.
let passed = 0, failed = 0;
export function check(cond, msg) {
  if (cond) passed++;
  else {
    failed++;
    console.error("FAIL:", msg);
  }
}
export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed || !passed ? 1 : 0);
}

// `pocketlm serve` on a free loopback port it picks itself (--port 0, read
// from its log).  Every server started is remembered so that killServers()
// can end them whatever happened.
const servers = [];
export function startServer(args) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, ["serve", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
    servers.push(p);
    let log = "";
    const timer = setTimeout(() => reject(new Error(`server did not start: ${log}`)), 20000);
    p.stderr.on("data", (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({ proc: p, port: Number(m[1]), log: () => log });
      }
    });
    p.on("exit", (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${log}`)); });
  });
}
export function killServers() {
  for (const p of servers) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
}

// llama.cpp's log-probabilities at every position of `tokens` (teacher
// forced, one thread: its spinning workers stall on a loaded machine).
export async function llamaLogProbs(l, file, tokens, contextSize) {
  const model = await l.loadModel({ modelPath: file });
  const context = await model.createContext({ contextSize, flashAttention: false, threads: 1 });
  const seq = context.getSequence();
  const res = await seq.controlledEvaluate(tokens.map((t) => [t, { generateNext: { probabilities: true } }]));
  const out = res.map((r) => {
    const nv = r.next.probabilities.size;  // greedy sampling keeps every candidate
    const lp = new Float64Array(nv).fill(-Infinity);
    for (const [tok, p] of r.next.probabilities) lp[tok] = Math.log(p);
    return lp;
  });
  await context.dispose();
  await model.dispose();
  return out;
}

export function logSoftmax(x) {
  let m = -Infinity;
  for (const v of x) m = Math.max(m, v);
  let s = 0;
  for (const v of x) s += Math.exp(v - m);
  const lse = m + Math.log(s);
  return Float64Array.from(x, (v) => v - lse);
}

// The top index and its lead over the runner-up.
export function top2(x) {
  let a = 0, b = -1;
  for (let i = 1; i < x.length; i++) {
    if (x[i] > x[a]) { b = a; a = i; } else if (b < 0 || x[i] > x[b]) b = i;
  }
  return [a, x[a] - x[b]];
}

// Short story openings in stories260K's vocabulary, for serving tests.
export const STORY_PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a bird",
                              "Sam had a red ball", "The sun was hot", "Mom said", "There was a big tree"];

// A greedy /v1/completions request: the response's JSON, or for a stream its
// pieces joined into the same shape ({ choices: [{ text }] }).
export async function completion(port, body, stream = false) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ temperature: 0, ...body, stream }),
  });
  if (!stream) return r.json();
  let text = "";
  for (const line of (await r.text()).split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    text += JSON.parse(line.slice(6)).choices[0].text ?? "";
  }
  return { choices: [{ text }] };
}

// One counter of a server's /metrics (pocketlm_NAME).
export async function metric(port, name) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(new RegExp(`^pocketlm_${name} (\\S+)$`, "m").exec(text)?.[1]);
}

// llama.cpp's greedy continuation of BOS + prompt as text: n tokens, or
// fewer when stopAtEos and it ends the text first.  One thread: on a loaded
// machine its default threads spin-wait for each other.
export async function llamaGreedyText(modelPath, prompt, n, { stopAtEos = false } = {}) {
  const l = await llama();
  const model = await l.loadModel({ modelPath });
  const context = await model.createContext({ contextSize: 256, threads: 1 });
  const out = [];
  for await (const t of context.getSequence().evaluate([model.tokens.bos, ...model.tokenize(prompt)],
                                                         { temperature: 0 })) {
    if (stopAtEos && (model.isSpecialToken?.(t) || t === model.tokens.eos)) break;
    out.push(t);
    if (out.length === n) break;
  }
  const text = model.detokenize(out);
  await context.dispose();
  await model.dispose();
  return text;
}
