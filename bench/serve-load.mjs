#!/usr/bin/env node
// Load test of `pocketlm serve` on loopback: a bounded number of streamed,
// greedy /v1/completions requests at each concurrency level.  Every answer
// must be complete (max_tokens tokens, finish "length") and byte-identical
// to the same prompt's answer served alone; the only errors allowed are the
// documented 503s of a full queue.  Per level it reports p50/p99 time to
// first token, aggregate generated tokens/s (and per CPU second of the
// server), the tokens per decode pass the server batched (/metrics), and
// the server's RSS; RSS before and after warm-up too.  Exit status 1 on any wrong or missing answer.
//
//   node bench/serve-load.mjs -m MODEL.gguf [--parallel 8] [--levels 1,4,16,64]
//        [--requests 64] [--max-tokens 32] [--warmup N] [-t THREADS] [-c CTX] [--json]
//        [--batch-invariant]   (the server's: needed for identical answers on a random-weights
//                               model, whose near-ties flip with the last bits of a batched sum)
//        [--draft-model F] [--draft-max N] [--draft-min N] [--draft-p-min P] [--lookup N]
//        [--lookup-cache F] [--draft-fixed]   (the server's speculative decoding; each level then
//                               reports the drafted and accepted tokens from /metrics)
//        [--reference-plain]   (the reference answers from a server without speculation,
//                               started first: speculation must not change an answer)
//
// Each level sends max(--requests, clients) requests, from `clients`
// concurrent clients that each send their next request when the last ends.
// The server (POCKETLM_BIN, default build/pocketlm) is started on a free
// port with a queue long enough for the largest level, and killed at the end.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = process.env.POCKETLM_BIN ?? path.join(here, "../build/pocketlm");

function parseArgs(argv) {
  const o = { parallel: 1, levels: [1, 4, 16, 64], requests: 64, maxTokens: 32, threads: 0, ctx: 512, json: false,
              timeoutS: 600, warmup: -1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === "-m" || a === "--model") o.model = v();
    else if (a === "--parallel" || a === "-np") o.parallel = Number(v());
    else if (a === "--levels") o.levels = v().split(",").map(Number);
    else if (a === "--requests") o.requests = Number(v());
    else if (a === "--max-tokens") o.maxTokens = Number(v());
    else if (a === "-t" || a === "--threads") o.threads = Number(v());
    else if (a === "-c" || a === "--ctx-size") o.ctx = Number(v());
    else if (a === "--timeout") o.timeoutS = Number(v());
    else if (a === "--warmup") o.warmup = Number(v());
    else if (a === "--json") o.json = true;
    else if (a === "--batch-invariant") o.invariant = true;
    else if (["--draft-model", "--draft-max", "--draft-min", "--draft-p-min", "--lookup", "--lookup-cache"].includes(a))
      o.spec = [...(o.spec ?? []), a, v()];
    else if (a === "--draft-fixed") o.spec = [...(o.spec ?? []), a];
    else if (a === "--reference-plain") o.referencePlain = true;
    else throw new Error(`unknown argument ${a} (see the comment at the top of ${path.basename(process.argv[1])})`);
  }
  if (!o.model) throw new Error("-m MODEL.gguf is required");
  if (o.warmup < 0) o.warmup = Math.max(...o.levels);
  if (!(o.parallel >= 1) || o.levels.some((n) => !(n >= 1)) || !(o.requests >= 1) || !(o.maxTokens >= 1))
    throw new Error("--parallel, --levels, --requests and --max-tokens must be >= 1");
  return o;
}

const PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a bird",
                 "Sam had a red ball", "The sun was hot", "Mom said", "There was a big tree"];

function startServer(o) {
  const queue = Math.max(...o.levels) + 8;  // every client of the largest level waits instead of a 503
  // --timeout: a client waiting in the queue sends and receives nothing;
  // the default idle timeout (30 s) would close it at the larger levels.
  const args = ["serve", "--port", "0", "-m", o.model, "-c", String(o.ctx), "--parallel", String(o.parallel),
                "--queue", String(queue), "--timeout", String(o.timeoutS), ...(o.threads ? ["-t", String(o.threads)] : []),
                ...(o.invariant ? ["--batch-invariant"] : []), ...(o.spec ?? [])];
  return new Promise((resolve, reject) => {
    const proc = spawn(BIN, args, { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    const timer = setTimeout(() => reject(new Error(`server did not start: ${log}`)), 60000);
    proc.stderr.on("data", (d) => {
      log += d;
      if (log.length > 1 << 20) log = log.slice(-(1 << 19));  // the per-request lines: keep the tail
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, port: Number(m[1]) });
      }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${log}`)); });
  });
}

// The server's CPU seconds (user + system; /proc/PID/stat in clock ticks of
// 1/100 s): on a loaded machine tokens per CPU second compare where wall
// time cannot.
const cpuSeconds = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
};
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;

async function metric(port, name) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(new RegExp(`^pocketlm_${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
}

// One streamed request: {status, text, tokens, finish, ttft (s), seconds}.
async function request(port, prompt, maxTokens) {
  const t0 = performance.now();
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
                           stream_options: { include_usage: true } }),
  });
  if (r.status !== 200) {
    await r.text();
    return { status: r.status, retryAfter: r.headers.get("retry-after") };
  }
  let text = "", tokens = -1, finish = null, ttft = null, buf = "";
  const dec = new TextDecoder();
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const ev = JSON.parse(line.slice(6));
      const c = ev.choices?.[0];
      if (c?.text && ttft === null) ttft = (performance.now() - t0) / 1000;
      if (c) text += c.text ?? "";
      if (c?.finish_reason) finish = c.finish_reason;
      if (ev.usage) tokens = ev.usage.completion_tokens;
    }
  }
  return { status: 200, text, tokens, finish, ttft, seconds: (performance.now() - t0) / 1000 };
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : NaN;
};

async function runLevel(srv, o, clients, reference, problems) {
  const total = Math.max(o.requests, clients);
  let next = 0, busy503 = 0, tokens = 0;
  const ttfts = [];
  const steps0 = await metric(srv.port, "decode_steps_total");
  const stepTok0 = await metric(srv.port, "decode_step_tokens_total");
  const drafted0 = await metric(srv.port, "spec_drafted_tokens_total");
  const accepted0 = await metric(srv.port, "spec_accepted_tokens_total");
  const cpu0 = cpuSeconds(srv.proc.pid);
  const t0 = performance.now();
  const client = async () => {
    for (let i; (i = next++) < total;) {
      const prompt = PROMPTS[i % PROMPTS.length];
      const r = await request(srv.port, prompt, o.maxTokens);
      if (r.status === 503 && r.retryAfter) { busy503++; continue; }
      if (r.status !== 200) { problems.push(`${clients} clients: HTTP ${r.status}`); continue; }
      if (r.tokens !== o.maxTokens || r.finish !== "length")
        problems.push(`${clients} clients: incomplete answer (${r.tokens} tokens, finish ${r.finish})`);
      else if (r.text !== reference.get(prompt))
        problems.push(`${clients} clients: answer to ${JSON.stringify(prompt)} differs from the one served alone`);
      tokens += Math.max(r.tokens, 0);
      if (r.ttft !== null) ttfts.push(r.ttft);
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  const seconds = (performance.now() - t0) / 1000;
  const cpuS = cpuSeconds(srv.proc.pid) - cpu0;
  const steps = await metric(srv.port, "decode_steps_total") - steps0;
  const stepTok = await metric(srv.port, "decode_step_tokens_total") - stepTok0;
  const drafted = await metric(srv.port, "spec_drafted_tokens_total") - drafted0;
  const accepted = await metric(srv.port, "spec_accepted_tokens_total") - accepted0;
  return { clients, requests: total, busy503, seconds, tokens, tokPerS: tokens / seconds,
           ttftP50: pct(ttfts, 50), ttftP99: pct(ttfts, 99), batch: steps ? stepTok / steps : 0,
           drafted, accepted, cpuS, tokPerCpuS: tokens / cpuS, rssMiB: rssMiB(srv.proc.pid) };
}

// Every prompt served alone, one request at a time.
async function serialAnswers(port, o) {
  const reference = new Map();
  for (const p of PROMPTS) {
    const r = await request(port, p, o.maxTokens);
    if (r.status !== 200 || r.tokens !== o.maxTokens) throw new Error(`serial request failed: ${JSON.stringify(r)}`);
    reference.set(p, r.text);
  }
  return reference;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  let plainReference = null;
  if (o.referencePlain) {  // the answers of a server without speculation
    const plain = await startServer({ ...o, spec: [] });
    try { plainReference = await serialAnswers(plain.port, o); } finally { plain.proc.kill("SIGKILL"); }
  }
  const srv = await startServer(o);
  const watchdog = setTimeout(() => { console.error(`serve-load: past ${o.timeoutS} s`); srv.proc.kill("SIGKILL");
                                      process.exit(1); }, o.timeoutS * 1000);
  const problems = [];
  try {
    const rssStart = rssMiB(srv.proc.pid);
    // The reference: every prompt served alone, one request at a time.
    const reference = await serialAnswers(srv.port, o);
    if (plainReference)
      for (const [p, text] of plainReference)
        if (reference.get(p) !== text)
          problems.push(`served alone, ${JSON.stringify(p)}: with speculation ${JSON.stringify(reference.get(p))}, ` +
                        `without ${JSON.stringify(text)}`);
    if (plainReference) for (const [p, text] of plainReference) reference.set(p, text);
    // Warm-up: --warmup requests (default: the largest level's clients), all at once.
    if (o.warmup > 0) await runLevel(srv, { ...o, requests: o.warmup }, o.warmup, reference, problems);
    const rssWarm = rssMiB(srv.proc.pid);
    const levels = [];
    for (const c of o.levels) levels.push(await runLevel(srv, o, c, reference, problems));
    const result = { parallel: o.parallel, maxTokens: o.maxTokens, rssStartMiB: rssStart, rssWarmMiB: rssWarm,
                     rssEndMiB: rssMiB(srv.proc.pid), levels, problems };
    if (o.json) console.log(JSON.stringify(result));
    else {
      console.log(`--parallel ${o.parallel}, ${o.maxTokens} tokens per answer; RSS ${rssStart.toFixed(0)} MiB at ` +
                  `start, ${rssWarm.toFixed(0)} after warm-up, ${result.rssEndMiB.toFixed(0)} at the end`);
      console.log("clients requests 503s  TTFT p50   TTFT p99   tok/s  tok/CPU-s  tokens/pass  RSS MiB" +
                  (o.spec ? "  drafted accepted" : ""));
      for (const l of levels)
        console.log(`${String(l.clients).padStart(7)} ${String(l.requests).padStart(8)} ${String(l.busy503).padStart(5)}` +
                    `  ${l.ttftP50.toFixed(3).padStart(7)} s  ${l.ttftP99.toFixed(3).padStart(7)} s` +
                    `  ${l.tokPerS.toFixed(1).padStart(6)}  ${l.tokPerCpuS.toFixed(2).padStart(9)}  ${l.batch.toFixed(2).padStart(11)}  ${l.rssMiB.toFixed(0).padStart(7)}` +
                    (o.spec ? `  ${String(l.drafted).padStart(7)} ${String(l.accepted).padStart(8)}` : ""));
      for (const p of problems.slice(0, 20)) console.log("PROBLEM:", p);
    }
  } finally {
    clearTimeout(watchdog);
    srv.proc.kill("SIGKILL");
  }
  process.exit(problems.length ? 1 : 0);
}

main().catch((e) => { console.error("serve-load:", e.message); process.exit(1); });
