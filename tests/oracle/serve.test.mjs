// pocketlm serve against the official npm clients `openai` and `ollama`
// (pinned in package.json), then hostile requests over raw sockets.  Greedy
// completions must be byte-identical to `pocketlm run` (whose greedy text the
// greedy oracle test holds to llama.cpp's).  Every server runs on a free
// loopback port it picks itself (--port 0, read from its log) and is killed
// at the end whatever happens; every loop is bounded.  Also: SIGTERM with and
// past the grace period, and --timeout closing silent clients only (never a
// request waiting in the queue or between tokens).
import net from "node:net";
import path from "node:path";
import OpenAI from "openai";
import { Ollama } from "ollama";
import { SHARED, pocketlm, check, finish, startServer as startServerIn, killServers } from "./lib.mjs";

const MODEL = path.join(SHARED, "models/stories260K.gguf");
const PROMPT = "Once upon a time";
const N = 48;
const KEY = "test-key-123";

// ---- servers -----------------------------------------------------------------

const startServer = (extra = []) => startServerIn(["-m", MODEL, "-c", "2048", "-t", "1", ...extra]);

const killAll = killServers;
process.on("exit", killAll);
const watchdog = setTimeout(() => { console.error("FAIL: the test ran past 300 s"); killAll(); process.exit(1); }, 300000);

// ---- raw HTTP ------------------------------------------------------------------

// Sends `chunks` (strings/Buffers, with an optional delay between them) and
// resolves with {status, headers, body} or {closed: true} when the server
// closed without an answer.
function rawRequest(port, chunks, { delayMs = 0, timeoutMs = 20000 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    let data = Buffer.alloc(0), done = false;
    const finishWith = (r) => { if (!done) { done = true; clearTimeout(t); sock.destroy(); resolve(r); } };
    const t = setTimeout(() => finishWith({ timeout: true }), timeoutMs);
    sock.on("data", (d) => {
      data = Buffer.concat([data, d]);
      const r = parseResponse(data);
      if (r) finishWith(r);
    });
    sock.on("error", () => finishWith(parseResponse(data, true) ?? { closed: true }));
    sock.on("close", () => finishWith(parseResponse(data, true) ?? { closed: true }));
    sock.on("connect", async () => {
      for (const c of chunks) {
        if (done) return;
        sock.write(c);
        if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      }
    });
  });
}

function parseResponse(buf, atEnd = false) {
  const s = buf.toString("latin1");
  const h = s.indexOf("\r\n\r\n");
  if (h < 0) return null;
  const head = s.slice(0, h), status = Number(/^HTTP\/1\.[01] (\d+)/.exec(head)?.[1]);
  const headers = Object.fromEntries(head.split("\r\n").slice(1).map((l) => {
    const i = l.indexOf(":");
    return [l.slice(0, i).toLowerCase(), l.slice(i + 1).trim()];
  }));
  const body = buf.subarray(Buffer.byteLength(s.slice(0, h + 4), "latin1"));
  if (headers["content-length"] !== undefined) {
    if (body.length < Number(headers["content-length"])) return atEnd ? { status, headers, body: body.toString() } : null;
    return { status, headers, body: body.subarray(0, Number(headers["content-length"])).toString() };
  }
  if (headers["transfer-encoding"] === "chunked") {
    if (!body.toString().endsWith("0\r\n\r\n") && !atEnd) return null;
    return { status, headers, body: body.toString() };
  }
  return atEnd ? { status, headers, body: body.toString() } : null;
}

function post(port, url, body, opts = {}) {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return rawRequest(port, [Buffer.concat([Buffer.from(
    `POST ${url} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${b.length}\r\n\r\n`), b])], opts);
}

// SIGTERM, then the exit code (0 = drained cleanly; under ASan, also no leaks).
function stop(server) {
  const code = new Promise((resolve) => {
    if (server.proc.exitCode !== null) resolve(server.proc.exitCode);
    server.proc.on("exit", (c) => resolve(c));
  });
  server.proc.kill("SIGTERM");
  return code;
}

const errorOf = (r) => { try { return JSON.parse(r.body).error; } catch { return undefined; } };

async function metrics(port) {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { Authorization: `Bearer ${KEY}` } });
  return r.text();
}
const metric = (text, name) => Number(new RegExp(`^${name.replace(/[{}"\/]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1]);

// ---- the reference: pocketlm run ----------------------------------------------

const ref = pocketlm(["run", "-m", MODEL, "-p", PROMPT, "-n", String(N), "--temp", "0", "--no-display-prompt",
                      "-t", "1"]);
check(ref.status === 0, `run: ${ref.stderr}`);
const want = ref.stdout.replace(/\n$/, "");
check(want.length > 20, `run's text: ${JSON.stringify(want)}`);

try {
  const srv = await startServer(["--api-key", KEY]);
  const base = `http://127.0.0.1:${srv.port}`;

  // ---- openai --------------------------------------------------------------------
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 30000 });
  const c1 = await openai.completions.create({ model: "stories260K", prompt: PROMPT, max_tokens: N, temperature: 0 });
  check(c1.choices[0].text === want, `openai completion differs from run:\n  run:   ${JSON.stringify(want)}\n` +
        `  serve: ${JSON.stringify(c1.choices[0].text)}`);
  check(c1.object === "text_completion" && c1.usage.prompt_tokens === 5 && c1.usage.completion_tokens === N &&
        c1.usage.total_tokens === 5 + N, `usage: ${JSON.stringify(c1.usage)}`);

  // the same prompt again: all but its last token come from the slot's cache
  const c2 = await openai.completions.create({ model: "stories260K", prompt: PROMPT, max_tokens: N, temperature: 0 });
  check(c2.choices[0].text === want && c2.usage.prompt_tokens_details?.cached_tokens === 4,
        `prefix reuse: ${JSON.stringify(c2.usage)}`);

  let streamed = "", finishReason = null, usage = null, nChunks = 0;
  const stream = await openai.completions.create({ model: "stories260K", prompt: PROMPT, max_tokens: N,
                                                   temperature: 0, stream: true,
                                                   stream_options: { include_usage: true } });
  for await (const ch of stream) {
    if (++nChunks > 10000) break;
    if (ch.choices.length) {
      streamed += ch.choices[0].text;
      finishReason = ch.choices[0].finish_reason ?? finishReason;
    }
    if (ch.usage) usage = ch.usage;
  }
  check(streamed === want, `openai stream differs from run: ${JSON.stringify(streamed)}`);
  check(finishReason === "length" && usage?.completion_tokens === N && nChunks >= 3,
        `stream end: ${finishReason} ${JSON.stringify(usage)} in ${nChunks} chunks`);

  const stopped = await openai.completions.create({ model: "x", prompt: PROMPT, max_tokens: N, temperature: 0,
                                                    stop: ["girl"] });
  check(stopped.choices[0].finish_reason === "stop" && want.startsWith(stopped.choices[0].text) &&
        !stopped.choices[0].text.includes("girl") && stopped.choices[0].text.length > 5,
        `stop: ${JSON.stringify(stopped.choices[0])}`);

  const lp = await openai.completions.create({ model: "x", prompt: PROMPT, max_tokens: 4, temperature: 0, logprobs: 2 });
  const L = lp.choices[0].logprobs;
  check(L && L.tokens.length === 4 && L.tokens.join("") === lp.choices[0].text && L.token_logprobs.every((x) => x <= 0) &&
        L.top_logprobs.every((t, i) => Object.keys(t).length === 2 && Math.max(...Object.values(t)) === L.token_logprobs[i]),
        `logprobs (greedy: the chosen token is the most likely): ${JSON.stringify(L)}`);

  // streamed, each chunk carries the logprobs of the tokens its text completes
  const lpStream = await openai.completions.create({ model: "x", prompt: PROMPT, max_tokens: 12, temperature: 0,
                                                    logprobs: 2, stream: true });
  const sTok = [], sLp = [];
  let sText = "";
  for await (const ch of lpStream) {
    sText += ch.choices[0]?.text ?? "";
    sTok.push(...(ch.choices[0]?.logprobs?.tokens ?? []));
    sLp.push(...(ch.choices[0]?.logprobs?.token_logprobs ?? []));
  }
  const lp12 = await openai.completions.create({ model: "x", prompt: PROMPT, max_tokens: 12, temperature: 0, logprobs: 2 });
  check(sText === lp12.choices[0].text && sTok.join("") === sText && sTok.length === 12 &&
        sTok.every((t, i) => t === lp12.choices[0].logprobs.tokens[i]) &&
        sLp.every((x, i) => Math.abs(x - lp12.choices[0].logprobs.token_logprobs[i]) < 1e-3),
        `streamed logprobs: ${JSON.stringify(sTok)} vs ${JSON.stringify(lp12.choices[0].logprobs.tokens)}`);

  const models = await openai.models.list();
  check(models.data.length === 1 && models.data[0].id === "stories260K", `models: ${JSON.stringify(models.data)}`);

  for (const [body, param] of [[{ prompt: PROMPT, temperature: 3 }, "temperature"], [{ prompt: PROMPT, top_p: 2 }, "top_p"],
                               [{ prompt: PROMPT, top_k: -1 }, "top_k"], [{ prompt: 5 }, "prompt"],
                               [{ prompt: PROMPT, max_tokens: 100000 }, "max_tokens"], [{ prompt: PROMPT, n: 2 }, "n"]]) {
    try {
      await openai.completions.create({ model: "x", ...body });
      check(false, `${JSON.stringify(body)} accepted`);
    } catch (e) {
      check(e.status === 400 && e.param === param && /must|at most|one/.test(e.message),
            `${JSON.stringify(body)}: ${e.status} ${e.param} ${e.message}`);
    }
  }
  // the chat endpoints (and the API key on them) are serve_chat.test.mjs's
  const chat = await openai.chat.completions.create({ model: "x", messages: [{ role: "user", content: "hi" }],
                                                     max_tokens: 2 });
  check(chat.choices[0].message.role === "assistant", `chat with the key: ${JSON.stringify(chat)}`);
  const noKey = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong", maxRetries: 0 });
  try {
    await noKey.models.list();
    check(false, "wrong key accepted");
  } catch (e) {
    check(e.status === 401, `wrong key: ${e.status}`);
  }

  // ---- ollama --------------------------------------------------------------------
  const ollama = new Ollama({ host: base, headers: { Authorization: `Bearer ${KEY}` } });
  const g = await ollama.generate({ model: "stories260K", prompt: PROMPT, raw: true, stream: false,
                                    options: { temperature: 0, num_predict: N } });
  check(g.response === want && g.done && g.done_reason === "length" && g.eval_count === N && g.prompt_eval_count === 5,
        `ollama generate: ${JSON.stringify({ ...g, context: undefined })}`);
  // A client resending the conversation so far (here: Ollama's context, the
  // prompt and answer tokens) plus more: only the new part is evaluated.
  // The answer's last token was sampled but never evaluated, so it is new too.
  const turn2 = await openai.completions.create({ model: "x", prompt: [...g.context, g.context[1]], max_tokens: 4, temperature: 0 });
  check(turn2.usage.prompt_tokens === 5 + N + 1 && turn2.usage.prompt_tokens_details?.cached_tokens === 5 + N - 1,
        `turn 2 evaluates only its new tokens: ${JSON.stringify(turn2.usage)}`);
  let og = "", last = null, parts = 0;
  for await (const part of await ollama.generate({ model: "stories260K", prompt: PROMPT, raw: true, stream: true,
                                                   options: { temperature: 0, num_predict: N } })) {
    if (++parts > 10000) break;
    og += part.response;
    last = part;
  }
  check(og === want && last?.done && Array.isArray(last.context) && last.context.length === 5 + N,
        `ollama stream: ${JSON.stringify(og)} ${JSON.stringify({ ...last, context: last?.context?.length })}`);
  // Near-uniform sampling emits byte tokens that form no character: the
  // server's JSON must carry exactly what Node's own UTF-8 decoder makes of
  // run's raw bytes (one U+FFFD per maximal invalid subpart).
  const hot = pocketlm(["run", "-m", MODEL, "-p", PROMPT, "-n", "300", "--temp", "50", "--top-k", "0", "--top-p", "1",
                        "--min-p", "0", "--seed", "5", "--no-display-prompt", "-t", "1"], { encoding: "buffer" });
  const hotText = new TextDecoder("utf-8").decode(hot.stdout.subarray(0, hot.stdout.length - 1));
  const hotOpts = { temperature: 50, top_k: 0, top_p: 1, min_p: 0, seed: 5, num_predict: 300 };
  const hg = await ollama.generate({ model: "stories260K", prompt: PROMPT, raw: true, stream: false, options: hotOpts });
  let hs = "";
  for await (const part of await ollama.generate({ model: "stories260K", prompt: PROMPT, raw: true, stream: true,
                                                   options: hotOpts })) hs += part.response;
  check(hotText.includes("\uFFFD") && hg.response === hotText && hs === hotText,
        `invalid UTF-8 out of the model: ${JSON.stringify(hotText.slice(0, 80))} vs ${JSON.stringify(hg.response.slice(0, 80))}`);

  const tags = await ollama.list();
  check(tags.models[0]?.name === "stories260K" && tags.models[0].details.format === "gguf" &&
        tags.models[0].details.family === "llama", `tags: ${JSON.stringify(tags)}`);
  const show = await ollama.show({ model: "stories260K" });
  check(show.model_info["general.architecture"] === "llama" && show.details.parameter_size, `show: ${JSON.stringify(show)}`);
  const ver = await fetch(`${base}/api/version`, { headers: { Authorization: `Bearer ${KEY}` } }).then((r) => r.json());
  check(typeof ver.version === "string", `version: ${JSON.stringify(ver)}`);
  const ochat = await ollama.chat({ model: "stories260K", messages: [{ role: "user", content: "hi" }], stream: false,
                                   options: { num_predict: 2 } });
  check(ochat.message?.role === "assistant" && ochat.done, `ollama chat with the key: ${JSON.stringify(ochat)}`);

  // ---- hostile requests -------------------------------------------------------------
  let r = await post(srv.port, "/v1/completions", "{\"prompt\": \"x\", ");
  check(r.status === 400 && /not valid JSON/.test(errorOf(r)?.message), `malformed: ${r.status} ${r.body}`);
  r = await post(srv.port, "/v1/completions", "[".repeat(100000) + "]".repeat(100000));
  check(r.status === 400 && /nested too deeply/.test(errorOf(r)?.message), `deeply nested: ${r.status} ${r.body?.slice(0, 200)}`);
  r = await post(srv.port, "/v1/completions", "{\"prompt\": {\"a\": [1, {\"b\": null}]}}");
  check(r.status === 400 && errorOf(r)?.param === "prompt", `wrong type: ${r.status} ${r.body}`);
  r = await post(srv.port, "/v1/completions", Buffer.from([0x7b, 0x22, 0x70, 0x72, 0x6f, 0x6d, 0x70, 0x74, 0x22, 0x3a,
                                                           0x22, 0xff, 0xfe, 0xc3, 0x22, 0x7d]));  // {"prompt":"\xff\xfe\xc3"}
  check(r.status === 400 && /not valid UTF-8/.test(errorOf(r)?.message), `invalid UTF-8: ${r.status} ${r.body}`);
  r = await post(srv.port, "/api/generate", "{\"model\": \"x\", \"prompt\": \"hi\", \"options\": {\"temperature\": \"hot\"}}");
  check(r.status === 400 && /temperature/.test(errorOf(r)), `ollama wrong type: ${r.status} ${r.body}`);
  r = await post(srv.port, "/v1/completions", Buffer.alloc(10 << 20, 0x20));
  check(r.status === 413 && /larger than/.test(errorOf(r)?.message), `10 MB body: ${r.status} ${r.body}`);
  r = await rawRequest(srv.port, [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n` +
    `Authorization: Bearer ${KEY}\r\n\r\n`, ...Array.from({ length: 12 }, () => `100000\r\n${" ".repeat(1 << 20)}\r\n`), "0\r\n\r\n"]);
  check(r.status === 413, `12 MiB chunked body: ${r.status} ${r.closed}`);
  r = await rawRequest(srv.port, [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n{`]);
  check(r.status === 413 || r.closed, `a 1 GB Content-Length: ${r.status} ${r.closed}`);
  r = await post(srv.port, "/v1/completions", "{}");
  check(r.status === 400 && errorOf(r)?.param === "prompt", `no prompt: ${r.status} ${r.body}`);
  r = await rawRequest(srv.port, [...`GET /health HTTP/1.1\r\nHost: x\r\n\r\n`], { delayMs: 100 });
  check(r.status === 200 && /ok/.test(r.body), `one byte per 100 ms: ${JSON.stringify(r)}`);
  r = await rawRequest(srv.port, ["GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"]);
  check(r.status === 404, `unknown path: ${r.status}`);
  r = await rawRequest(srv.port, ["GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n"]);
  check(r.status === 405, `wrong method: ${r.status}`);

  // 200 idle connections, and the server still answers
  const idle = await Promise.all(Array.from({ length: 200 }, () => new Promise((res) => {
    const s = net.connect(srv.port, "127.0.0.1", () => res(s));
    s.on("error", () => res(s));
  })));
  const during = await openai.completions.create({ model: "x", prompt: PROMPT, max_tokens: N, temperature: 0 });
  check(during.choices[0].text === want, "with 200 idle connections open");
  for (const s of idle) s.destroy();

  // a client that disconnects mid-stream cancels its generation
  const before = metric(await metrics(srv.port), 'pocketlm_jobs_total{outcome="cancelled"}');
  await new Promise((resolve) => {
    const body = JSON.stringify({ prompt: PROMPT, max_tokens: 2000, ignore_eos: true, temperature: 0, stream: true });
    const s = net.connect(srv.port, "127.0.0.1", () => s.write(
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Length: ${body.length}\r\n\r\n${body}`));
    s.once("data", () => { s.destroy(); resolve(); });
    s.on("error", resolve);
  });
  let after = before;
  for (let i = 0; i < 100 && after === before; i++) {
    await new Promise((res) => setTimeout(res, 50));
    after = metric(await metrics(srv.port), 'pocketlm_jobs_total{outcome="cancelled"}');
  }
  check(after === before + 1, `disconnect mid-stream cancels: ${before} -> ${after}`);
  // ... and so does one that leaves while its non-streamed request waits
  // behind another (a long stream that keeps the worker busy)
  const before2 = after;
  const longBody = JSON.stringify({ prompt: PROMPT, max_tokens: 2000, ignore_eos: true, temperature: 0, stream: true });
  const busyStream = post(srv.port, "/v1/completions", longBody, { timeoutMs: 60000 });
  await new Promise((resolve) => {
    const body = JSON.stringify({ prompt: PROMPT, max_tokens: 2000, ignore_eos: true, temperature: 0 });
    const s = net.connect(srv.port, "127.0.0.1", () => {
      s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n` +
              `Content-Length: ${body.length}\r\n\r\n${body}`);
      setTimeout(() => { s.destroy(); resolve(); }, 20);
    });
    s.on("error", resolve);
  });
  check((await busyStream).status === 200, "the long stream completes");
  for (let i = 0; i < 100 && after === before2; i++) {
    await new Promise((res) => setTimeout(res, 50));
    after = metric(await metrics(srv.port), 'pocketlm_jobs_total{outcome="cancelled"}');
  }
  check(after === before2 + 1, `disconnect while waiting cancels: ${before2} -> ${after}`);
  const m = await metrics(srv.port);
  check(metric(m, 'pocketlm_requests_total{endpoint="/v1/completions"}') >= 10 && metric(m, "pocketlm_resident_memory_bytes") > 0 &&
        metric(m, "pocketlm_prompt_tokens_cached_total") >= 4 && metric(m, "pocketlm_queue_depth") === 0,
        `metrics:\n${m}`);
  // the list: requests, tokens/s, queue depth, slot use, RSS; every
  // sample a Prometheus text line of a metric with its HELP and TYPE
  check(metric(m, "pocketlm_decode_tokens_per_second") > 0 && metric(m, "pocketlm_generated_tokens_total") > 0 &&
        metric(m, "pocketlm_slots") === 1 && metric(m, "pocketlm_slots_busy") === 0 &&
        metric(m, "pocketlm_resident_memory_peak_bytes") >= metric(m, "pocketlm_resident_memory_bytes"),
        `metrics: tokens/s, slots, RSS:\n${m}`);
  const samples = m.split("\n").filter((l) => l && !l.startsWith("#"));
  check(samples.length > 10 && samples.every((l) => {
    const name = /^([a-z_]+)(\{[a-z_]+="[^"]*"\})? -?[0-9.e+]+$/.exec(l)?.[1];
    return name && m.includes(`# HELP ${name} `) && m.includes(`# TYPE ${name} `);
  }), `Prometheus text format:\n${m}`);
  const still = await openai.completions.create({ model: "x", prompt: PROMPT, max_tokens: N, temperature: 0 });
  check(still.choices[0].text === want, "still serving after the hostile requests");

  // ---- a full queue: 503 with Retry-After; every answer still the greedy text ----
  const busy = await startServer(["--queue", "1", "--grace", "120"]);
  const bodies = Array.from({ length: 24 }, () =>
    post(busy.port, "/v1/completions", JSON.stringify({ prompt: PROMPT, max_tokens: 1500, ignore_eos: true, temperature: 0 }),
         { timeoutMs: 100000 }));
  const results = await Promise.all(bodies);
  const ok = results.filter((x) => x.status === 200), refused = results.filter((x) => x.status === 503);
  check(ok.length >= 1 && refused.length >= 1 && ok.length + refused.length === results.length,
        `queue of 1 under 24 requests: ${ok.length} ok, ${refused.length} refused, others ${JSON.stringify(results.filter((x) => x.status !== 200 && x.status !== 503))}`);
  check(refused.every((x) => x.headers["retry-after"] && /busy/.test(errorOf(x)?.message)), "503s carry Retry-After");
  const texts = new Set(ok.map((x) => JSON.parse(x.body).choices[0].text));
  check(texts.size === 1, `answers differ under load: ${texts.size} distinct`);

  for (let i = 0; i < 200; i++) {  // the busy server drains before the next part
    const mt = await metrics(busy.port);
    if (metric(mt, "pocketlm_queue_depth") === 0 && metric(mt, "pocketlm_slots_busy") === 0) break;
    await new Promise((res) => setTimeout(res, 100));
  }

  // ---- SIGTERM: a running stream finishes, the server exits 0 ----
  const chunks = [];
  const sigDone = new Promise((resolve) => {
    const body = JSON.stringify({ prompt: PROMPT, max_tokens: 300, ignore_eos: true, temperature: 0, stream: true });
    const s = net.connect(busy.port, "127.0.0.1", () => s.write(
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`));
    s.on("data", (d) => {
      if (chunks.length === 0) busy.proc.kill("SIGTERM");
      chunks.push(d);
    });
    s.on("close", resolve);
    s.on("error", resolve);
  });
  const exitCode = new Promise((resolve) => busy.proc.on("exit", (code) => resolve(code)));
  await sigDone;
  const all = Buffer.concat(chunks).toString();
  check(/data: \[DONE\]/.test(all), `the running stream finished after SIGTERM: ...${all.slice(-200)}`);
  check(await exitCode === 0, "SIGTERM: exit 0");

  // ---- SIGTERM past the grace period: the running request is cancelled, exit 0 ----
  const graceless = await startServer(["--grace", "0"]);
  const gChunks = [];
  const gDone = new Promise((resolve) => {
    const body = JSON.stringify({ prompt: PROMPT, max_tokens: 2000, ignore_eos: true, temperature: 0, stream: true });
    const s = net.connect(graceless.port, "127.0.0.1", () => s.write(
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`));
    s.on("data", (d) => {
      if (gChunks.length === 0) graceless.proc.kill("SIGTERM");
      gChunks.push(d);
    });
    s.on("close", resolve);
    s.on("error", resolve);
  });
  const gExit = new Promise((resolve) => graceless.proc.on("exit", (code) => resolve(code)));
  await gDone;
  const gText = Buffer.concat(gChunks).toString();
  // the client is told: an error event, not a finish_reason as if the cut text were whole
  check(/"error":\{"message":"cancelled: the server is shutting down"/.test(gText) && /data: \[DONE\]/.test(gText) &&
        !/"finish_reason":"(length|stop)"/.test(gText), `--grace 0: the running generation was cancelled: ...${gText.slice(-300)}`);
  check(await gExit === 0, "--grace 0: exit 0");

  // ---- --timeout counts the client's silence, never the time a request waits on us ----
  // One slot, six long requests: the later ones wait in the queue (and
  // streams between tokens) longer than --timeout 1, and all complete.
  // Ollama's load_duration is a request's time in the queue: the premise.
  const patient = await startServer(["--timeout", "1", "--queue", "8"]);
  const LONG_N = 2000;
  const longReq = ([api, stream]) => api === "openai"
    ? post(patient.port, "/v1/completions", JSON.stringify({ prompt: PROMPT, max_tokens: LONG_N, ignore_eos: true,
                                                              temperature: 0, stream }), { timeoutMs: 250000 })
    : post(patient.port, "/api/generate", JSON.stringify({ model: "x", prompt: PROMPT, raw: true, stream,
                                                            options: { temperature: 0, num_predict: 64 } }),
           { timeoutMs: 250000 });
  const kinds = [["openai", false], ["openai", true], ["openai", false], ["openai", true], ["ollama", false],
                 ["ollama", true]];
  const waited = await Promise.all(kinds.map(async (k, i) => {
    await new Promise((res) => setTimeout(res, 50 * i));  // in this order into the queue
    return longReq(k);
  }));
  check(waited.every((r) => r.status === 200), `queued behind --timeout 1: ${waited.map((r) => r.status ?? JSON.stringify(r))}`);
  const ollamaDone = (r) => {
    const lines = (r.body ?? "").split("\n").filter((l) => /^\{/.test(l.trim()));
    try { return JSON.parse(lines.at(-1)); } catch { return null; }
  };
  const finals = [ollamaDone(waited[4]), ollamaDone(waited[5])];
  check(JSON.parse(waited[0].body ?? "{}").usage?.completion_tokens === LONG_N &&
        JSON.parse(waited[2].body ?? "{}").usage?.completion_tokens === LONG_N &&
        /data: \[DONE\]/.test(waited[1].body) && /data: \[DONE\]/.test(waited[3].body) &&
        finals.every((f) => f?.done === true), "every queued answer is whole");
  const queuedS = Math.max(...finals.map((f) => (f?.load_duration ?? 0) / 1e9));
  console.log(`--timeout 1: the last requests waited ${queuedS.toFixed(1)} s in the queue`);
  check(queuedS > 1.5, `the premise: requests waited in the queue longer than --timeout (${queuedS.toFixed(2)} s)`);
  // ... while a client that says nothing is still closed after the timeout,
  // also on a kept-alive connection after its answer (a stream's too)
  const silentClose = (chunks) => new Promise((resolve) => {
    const s = net.connect(patient.port, "127.0.0.1", () => { for (const c of chunks) s.write(c); });
    let got = "";
    const t = setTimeout(() => { s.destroy(); resolve({ closed: false, got }); }, 15000);
    s.on("data", (d) => { got += d; });
    s.on("close", () => { clearTimeout(t); resolve({ closed: true, got }); });
    s.on("error", () => {});
  });
  let sc = await silentClose([]);
  check(sc.closed, "an idle connection is closed after --timeout");
  sc = await silentClose(["GET /health HTTP/1.1\r\nHost: x\r\n\r\n"]);
  check(sc.closed && /200 OK/.test(sc.got), `idle after an answer: closed ${sc.closed}: ${sc.got.slice(0, 100)}`);
  const sBody = JSON.stringify({ prompt: PROMPT, max_tokens: 8, temperature: 0, stream: true });
  sc = await silentClose([`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${sBody.length}\r\n\r\n${sBody}`]);
  check(sc.closed && /data: \[DONE\]/.test(sc.got), `idle after a stream: closed ${sc.closed}: ${sc.got.slice(-100)}`);
  check(await stop(patient) === 0, "the --timeout 1 server: SIGTERM, exit 0");
  check(await stop(srv) === 0, `the first server: SIGTERM, exit 0: ${srv.log().slice(-2000)}`);
} catch (e) {
  check(false, `exception: ${e.stack ?? e}`);
}
clearTimeout(watchdog);
killAll();
finish();
