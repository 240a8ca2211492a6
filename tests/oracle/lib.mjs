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
