// pocketlm serve's chat endpoints against the official npm clients `openai`
// and `ollama`: /v1/chat/completions and /api/chat, streaming and not, on
// stories260K (no chat template of its own: the chatml fallback).  The
// reference is independent of the server: `pocketlm template` renders the
// conversation (its Jinja output is held to @huggingface/jinja by the
// chat_template test) and `pocketlm run` continues it greedily (held to
// llama.cpp by the greedy test); the server's answer must be that text, its
// prompt that many tokens.  Tools: stories260K cannot call one, so the test
// checks the request side (the tools rendered by the qwen3 template, the
// exact token count, and the greedy answer to that prompt); the output parser
// has its own unit test (tests/test_tool_calls.c).  logprobs/top_logprobs are
// held to llama.cpp's own log-probabilities of the same tokens (node-llama-cpp,
// teacher forced).  Ollama's /api/generate renders its prompt through the
// template (system + prompt as the user's message) or a Go `template`, which
// must give the same prompt as template+run.  Every loop is bounded.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { Ollama } from "ollama";
import { SHARED, pocketlm, check, finish, startServer as startServerIn, killServers, llama, llamaLogProbs } from "./lib.mjs";

const MODEL = path.join(SHARED, "models/stories260K.gguf");
const N = 24;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "plm-serve-chat-"));

const startServer = (extra = []) => startServerIn(["-m", MODEL, "-c", "1024", "-t", "1", ...extra]);

function cleanup() {
  killServers();
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.on("exit", cleanup);
const watchdog = setTimeout(() => { console.error("FAIL: the test ran past 240 s"); cleanup(); process.exit(1); }, 240000);

// ---- the reference: pocketlm template + pocketlm tokenize + pocketlm run ------------

let nFile = 0;
function writeJson(v) {
  const f = path.join(tmp, `f${nFile++}.json`);
  fs.writeFileSync(f, JSON.stringify(v));
  return f;
}

// The rendered prompt, its token count (BOS as the vocabulary asks, special
// tokens parsed) and the greedy continuation of n tokens.
// dropBos: the template writes the model's BOS text, which the tokenizer
// adds as well; the prompt is run without the written one (one BOS, as llama.cpp).
function reference(messages, { template = "chatml", file = null, tools = null, vars = [], n = N, dropBos = false } = {}) {
  const args = ["template", ...(file ? ["--template", file] : ["--chat-template", template]),
                "--messages", writeJson(messages), "--add-generation-prompt", ...(dropBos ? ["-m", MODEL] : [])];
  if (tools) args.push("--tools", writeJson(tools));
  for (const v of vars) args.push("--var", v);
  const t = pocketlm(args);
  check(t.status === 0, `template: ${t.stderr}`);
  const promptFile = path.join(tmp, `p${nFile++}.txt`);
  check(!dropBos || t.stdout.startsWith("<s>"), `the template writes BOS: ${show(t.stdout.slice(0, 20))}`);
  fs.writeFileSync(promptFile, dropBos ? t.stdout.slice(3) : t.stdout);
  const tok = pocketlm(["tokenize", "-m", MODEL, "-f", promptFile, "--add-special", "--parse-special"]);
  check(tok.status === 0, `tokenize: ${tok.stderr}`);
  const nTokens = tok.stdout.trim().split(/\s+/).filter(Boolean).length;
  const run = pocketlm(["run", "-m", MODEL, "-f", promptFile, "-n", String(n), "--temp", "0", "--no-display-prompt",
                        "-t", "1", "-c", "1024"]);
  check(run.status === 0, `run: ${run.stderr}`);
  return { prompt: t.stdout, nTokens, text: run.stdout.replace(/\n$/, "") };
}

// A raw prompt (no template) run as /api/generate's raw mode sends it: BOS
// as the vocabulary asks, special tokens parsed.
function rawReference(text, n = N) {
  const promptFile = path.join(tmp, `r${nFile++}.txt`);
  fs.writeFileSync(promptFile, text);
  const tok = pocketlm(["tokenize", "-m", MODEL, "-f", promptFile, "--add-special", "--parse-special"]);
  check(tok.status === 0, `tokenize: ${tok.stderr}`);
  const run = pocketlm(["run", "-m", MODEL, "-f", promptFile, "-n", String(n), "--temp", "0", "--no-display-prompt",
                        "-t", "1", "-c", "1024"]);
  check(run.status === 0, `run: ${run.stderr}`);
  return { prompt: text, nTokens: tok.stdout.trim().split(/\s+/).filter(Boolean).length, text: run.stdout.replace(/\n$/, "") };
}

// llama.cpp's greedy continuation of a rendered chat prompt and the
// log-probabilities of every position (teacher forced), with each token's
// text as llama.cpp's detokenizer writes it after what precedes it.
async function llamaChatLogProbs(promptText, n) {
  const l = await llama();
  const model = await l.loadModel({ modelPath: MODEL });
  const prompt = [model.tokens.bos, ...model.tokenize(promptText, true)];
  const context = await model.createContext({ contextSize: 512, threads: 1 });
  const gen = [];
  for await (const t of context.getSequence().evaluate(prompt, { temperature: 0 })) {
    if (model.isEogToken(t) || gen.length === n) break;
    gen.push(t);
  }
  await context.dispose();
  const all = [...prompt, ...gen];
  const piece = (t, before) => model.detokenize([t], false, before);
  const lps = await llamaLogProbs(l, MODEL, all, 512);
  const out = gen.map((t, i) => {
    const lp = lps[prompt.length - 1 + i], before = all.slice(0, prompt.length + i);
    const order = [...lp.keys()].sort((a, b) => lp[b] - lp[a]);
    return { token: piece(t, before), logprob: lp[t], top: order.slice(0, 8).map((k) => ({ token: piece(k, before), logprob: lp[k] })) };
  });
  await model.dispose();
  return { nPrompt: prompt.length, tokens: out };
}

// OpenAI's chat logprobs (choices[].logprobs.content) against llama.cpp's:
// the same tokens, their log-probabilities and their top alternatives.
function checkLogprobs(what, content, ref, top) {
  const TOL = 2e-3;
  check(Array.isArray(content) && content.length > 0 && content.length <= ref.tokens.length,
        `${what}: ${content?.length} entries, llama.cpp generated ${ref.tokens.length}`);
  for (let i = 0; i < (content?.length ?? 0); i++) {
    const c = content[i], r = ref.tokens[i];
    check(c.token === r.token && Buffer.from(c.bytes).toString() === c.token && Math.abs(c.logprob - r.logprob) < TOL,
          `${what} token ${i}: ${show({ token: c.token, logprob: c.logprob })} vs llama.cpp ${show({ token: r.token, logprob: r.logprob })}`);
    check(c.top_logprobs.length === top, `${what} token ${i}: ${c.top_logprobs.length} alternatives, asked ${top}`);
    for (let k = 0; k < c.top_logprobs.length; k++) {
      const a = c.top_logprobs[k], b = r.top[k];
      // two alternatives this close may be in either order
      const tie = (k > 0 && Math.abs(r.top[k - 1].logprob - b.logprob) < TOL) || Math.abs(r.top[k + 1].logprob - b.logprob) < TOL;
      check(Math.abs(a.logprob - b.logprob) < TOL && (a.token === b.token || tie),
            `${what} token ${i} alternative ${k}: ${show(a)} vs llama.cpp ${show(b)}`);
    }
  }
}

const show = (s) => JSON.stringify(s);
const MSGS = [
  { role: "system", content: "You are a storyteller." },
  { role: "user", content: "Tell me a story about a cat." },
];
const ref1 = reference(MSGS);
check(ref1.prompt.includes("<|im_start|>user\nTell me a story about a cat.<|im_end|>") &&
      ref1.prompt.endsWith("<|im_start|>assistant\n"), `chatml render: ${show(ref1.prompt)}`);
check(ref1.text.length > 10, `run's text: ${show(ref1.text)}`);

try {
  const srv = await startServer();
  check(/no tokenizer\.chat_template: chat uses chatml/.test(srv.log()), `fallback note: ${srv.log()}`);
  const base = `http://127.0.0.1:${srv.port}`;
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0, timeout: 30000 });

  // ---- openai, not streaming ------------------------------------------------------
  const r1 = await openai.chat.completions.create({ model: "stories260K", messages: MSGS, max_tokens: N,
                                                    temperature: 0 });
  const m1 = r1.choices[0].message;
  check(r1.object === "chat.completion" && m1.role === "assistant", `reply shape: ${show(r1)}`);
  check(m1.content === ref1.text, `chat differs from template+run:\n  run:   ${show(ref1.text)}\n  serve: ${show(m1.content)}`);
  check(r1.usage.prompt_tokens === ref1.nTokens && r1.usage.completion_tokens === N &&
        r1.choices[0].finish_reason === "length", `usage ${show(r1.usage)} vs ${ref1.nTokens} prompt tokens, ` +
        `finish ${r1.choices[0].finish_reason}`);
  check(!m1.tool_calls && m1.reasoning_content === undefined, `no tools, no reasoning: ${show(m1)}`);

  // ---- openai, streaming: the role first, then content deltas ------------------------
  const stream = await openai.chat.completions.create({ model: "stories260K", messages: MSGS, max_tokens: N,
                                                        temperature: 0, stream: true,
                                                        stream_options: { include_usage: true } });
  let streamed = "", firstDelta = null, finishReason = null, usage = null, nChunks = 0;
  for await (const ch of stream) {
    if (++nChunks > 10000) break;
    if (ch.object !== "chat.completion.chunk") check(false, `chunk object: ${ch.object}`);
    if (ch.choices.length) {
      firstDelta ??= ch.choices[0].delta;
      streamed += ch.choices[0].delta.content ?? "";
      finishReason = ch.choices[0].finish_reason ?? finishReason;
    }
    if (ch.usage) usage = ch.usage;
  }
  check(firstDelta?.role === "assistant", `first delta: ${show(firstDelta)}`);
  check(streamed === ref1.text, `stream differs from template+run: ${show(streamed)}`);
  check(finishReason === "length" && usage?.prompt_tokens === ref1.nTokens && usage?.completion_tokens === N,
        `stream end: ${finishReason} ${show(usage)}`);

  // ---- multi-turn: the resent conversation evaluates only the new tokens ------------
  const TURN2 = [...MSGS, { role: "assistant", content: m1.content }, { role: "user", content: "What happened next?" }];
  const ref2 = reference(TURN2);
  const r2 = await openai.chat.completions.create({ model: "x", messages: TURN2, max_tokens: N, temperature: 0 });
  const cached = r2.usage.prompt_tokens_details?.cached_tokens;
  check(r2.choices[0].message.content === ref2.text && r2.usage.prompt_tokens === ref2.nTokens,
        `turn 2 differs from template+run: ${show(r2.choices[0].message.content)} vs ${show(ref2.text)}`);
  check(cached >= ref1.nTokens && r2.usage.prompt_tokens - cached < ref2.nTokens - ref1.nTokens,
        `turn 2 re-evaluated more than the new text: ${cached} of ${r2.usage.prompt_tokens} cached, ` +
        `turn 1 was ${ref1.nTokens}`);

  // content as text parts (joined by newlines) and null content, as clients send them
  const PARTS = [
    { role: "system", content: [{ type: "text", text: "You are a storyteller." }] },
    { role: "user", content: [{ type: "text", text: "Tell me a story" }, { type: "text", text: "about a cat." }] },
    { role: "assistant", content: null },
    { role: "user", content: "Go on." },
  ];
  const refParts = reference([MSGS[0], { role: "user", content: "Tell me a story\nabout a cat." },
                              { role: "assistant", content: "" }, PARTS[3]], { n: 8 });
  const rp = await openai.chat.completions.create({ model: "x", messages: PARTS, max_tokens: 8, temperature: 0 });
  check(rp.choices[0].message.content === refParts.text && rp.usage.prompt_tokens === refParts.nTokens,
        `text parts: ${show(rp.choices[0].message.content)} ${rp.usage.prompt_tokens} vs ` +
        `${show(refParts.text)} ${refParts.nTokens}`);

  // ---- ollama ------------------------------------------------------------------------
  const ollama = new Ollama({ host: base });
  const o1 = await ollama.chat({ model: "stories260K", messages: MSGS, stream: false,
                                 options: { num_predict: N, temperature: 0 } });
  check(o1.message.role === "assistant" && o1.message.content === ref1.text && o1.prompt_eval_count === ref1.nTokens &&
        o1.eval_count === N && o1.done, `ollama chat: ${show(o1)}`);
  const os1 = await ollama.chat({ model: "stories260K", messages: MSGS, stream: true,
                                  options: { num_predict: N, temperature: 0 } });
  let ostreamed = "", olast = null, nLines = 0;
  for await (const part of os1) {
    if (++nLines > 10000) break;
    ostreamed += part.message?.content ?? "";
    olast = part;
  }
  check(ostreamed === ref1.text && olast?.done && olast.done_reason === "length" && nLines >= 2,
        `ollama stream: ${show(ostreamed)} in ${nLines} lines, last ${show(olast)}`);

  // ---- logprobs / top_logprobs, held to llama.cpp's log-probabilities ---------------------
  const LP_N = 16, TOP = 3;
  const lref = await llamaChatLogProbs(ref1.prompt, LP_N);
  check(lref.nPrompt === ref1.nTokens, `llama.cpp's prompt is ${lref.nPrompt} tokens, ours ${ref1.nTokens}`);
  const lp1 = await openai.chat.completions.create({ model: "x", messages: MSGS, max_tokens: LP_N, temperature: 0,
                                                     logprobs: true, top_logprobs: TOP });
  const lc1 = lp1.choices[0].logprobs?.content;
  check(lc1?.length === lp1.usage.completion_tokens && lc1.map((t) => t.token).join("") === lp1.choices[0].message.content,
        `one entry per generated token, their texts the content: ${show(lc1?.map((t) => t.token))} vs ` +
        `${show(lp1.choices[0].message.content)}`);
  checkLogprobs("chat logprobs", lc1, lref, TOP);
  const lps = await openai.chat.completions.create({ model: "x", messages: MSGS, max_tokens: LP_N, temperature: 0,
                                                     logprobs: true, top_logprobs: TOP, stream: true });
  const lcs = [];
  let lpText = "", lpChunks = 0;
  for await (const ch of lps) {
    if (++lpChunks > 10000) break;
    lpText += ch.choices[0]?.delta?.content ?? "";
    lcs.push(...(ch.choices[0]?.logprobs?.content ?? []));
  }
  check(lpText === lp1.choices[0].message.content && lcs.length === lc1?.length &&
        lcs.every((t, i) => t.token === lc1[i].token && Math.abs(t.logprob - lc1[i].logprob) < 1e-3),
        `streamed logprobs: ${show(lcs.map((t) => t.token))} vs ${show(lc1?.map((t) => t.token))}`);
  checkLogprobs("streamed chat logprobs", lcs, lref, TOP);
  const plain = await openai.chat.completions.create({ model: "x", messages: MSGS, max_tokens: 4, temperature: 0,
                                                      logprobs: true });
  check(plain.choices[0].logprobs?.content?.length === 4 && plain.choices[0].logprobs.content.every((t) => t.top_logprobs.length === 0),
        `logprobs without top_logprobs: ${show(plain.choices[0].logprobs)}`);
  const none = await openai.chat.completions.create({ model: "x", messages: MSGS, max_tokens: 4, temperature: 0 });
  check(none.choices[0].logprobs === null, `no logprobs unless asked: ${show(none.choices[0].logprobs)}`);

  // ---- Ollama's /api/generate applies the template as Ollama does ---------------------------
  // The prompt is the user's message after `system`, rendered by the chat
  // template with the assistant's turn opened: the same prompt as
  // /api/chat's, so the same answer as template+run (ref1).
  const [SYS, Q] = [MSGS[0].content, MSGS[1].content];
  const g1 = await ollama.generate({ model: "stories260K", system: SYS, prompt: Q, stream: false,
                                     options: { num_predict: N, temperature: 0 } });
  check(g1.response === ref1.text && g1.prompt_eval_count === ref1.nTokens && g1.context?.length === ref1.nTokens + g1.eval_count,
        `generate through the template: ${show(g1.response)} (${g1.prompt_eval_count} prompt tokens) vs ` +
        `${show(ref1.text)} (${ref1.nTokens})`);
  let gs = "", glast = null, gParts = 0;
  for await (const part of await ollama.generate({ model: "stories260K", system: SYS, prompt: Q, stream: true,
                                                   options: { num_predict: N, temperature: 0 } })) {
    if (++gParts > 10000) break;
    gs += part.response;
    glast = part;
  }
  check(gs === ref1.text && glast?.done && glast.prompt_eval_count === ref1.nTokens,
        `generate streamed through the template: ${show(gs)}`);
  const refUser = reference([MSGS[1]]);
  const g2 = await ollama.generate({ model: "stories260K", prompt: Q, stream: false, options: { num_predict: N, temperature: 0 } });
  check(g2.response === refUser.text && g2.prompt_eval_count === refUser.nTokens,
        `generate without system: ${g2.prompt_eval_count} vs ${refUser.nTokens}`);
  // raw: the prompt as it is, `system` ignored (as Ollama ignores it)
  const refRaw = rawReference(Q);
  const g3 = await ollama.generate({ model: "stories260K", system: SYS, prompt: Q, raw: true, stream: false,
                                     options: { num_predict: N, temperature: 0 } });
  check(g3.response === refRaw.text && g3.prompt_eval_count === refRaw.nTokens,
        `raw generate: ${g3.prompt_eval_count} vs ${refRaw.nTokens}, ${show(g3.response)} vs ${show(refRaw.text)}`);
  // `template`: Ollama's Go template.  This one is chatml written the
  // Ollama way: it must give exactly the Jinja chatml prompt (the text after
  // {{ .Response }} is dropped: the prompt ends where the reply begins).
  const GO_CHATML = "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}<|im_start|>user\n" +
                    "{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n{{ .Response }}<|im_end|>\n";
  for (const [sys, ref] of [[SYS, ref1], [undefined, refUser]]) {
    const g = await ollama.generate({ model: "stories260K", system: sys, prompt: Q, template: GO_CHATML, stream: false,
                                      options: { num_predict: N, temperature: 0 } });
    check(g.response === ref.text && g.prompt_eval_count === ref.nTokens,
          `Go template${sys ? " with system" : ""}: ${g.prompt_eval_count} vs ${ref.nTokens}`);
  }
  const refTrim = rawReference(`Q: ${Q}A:`);  // what "{{- ... -}}" leaves of the template below
  const g4 = await ollama.generate({ model: "stories260K", prompt: Q, stream: false, options: { num_predict: N, temperature: 0 },
                                     template: "{{/* a comment */}}{{ if .System }}never{{ else }}Q: {{ end }}{{ .Prompt -}}\n\n  A:{{ .Response }} junk" });
  check(g4.response === refTrim.text && g4.prompt_eval_count === refTrim.nTokens,
        `Go template with trimming: ${g4.prompt_eval_count} vs ${refTrim.nTokens}`);
  const gbad = await fetch(`${base}/api/generate`, { method: "POST", body: JSON.stringify({
    model: "x", prompt: Q, stream: false, template: "{{ range .Messages }}{{ .Content }}{{ end }}" }) });
  const gbadBody = await gbad.json();
  check(gbad.status === 400 && /template/.test(gbadBody.error) && /range/.test(gbadBody.error),
        `an unsupported Go template is refused by name: ${gbad.status} ${show(gbadBody)}`);

  // ---- bad chat requests get 400 with the field named ------------------------------------
  const bad = async (body) => {
    const r = await fetch(`${base}/v1/chat/completions`, { method: "POST", body: JSON.stringify(body) });
    return { status: r.status, error: (await r.json()).error };
  };
  let b = await bad({ messages: [{ content: "no role" }] });
  check(b.status === 400 && b.error?.param === "messages", `no role: ${show(b)}`);
  b = await bad({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] });
  check(b.status === 400 && /text only/.test(b.error?.message), `image part: ${show(b)}`);
  b = await bad({ messages: MSGS, tools: [{ type: "function", function: { name: "f" } }],
                  tool_choice: { type: "function", function: { name: "g" } } });
  check(b.status === 400 && b.error?.param === "tool_choice", `unknown tool_choice: ${show(b)}`);
  b = await bad({ messages: MSGS, tool_choice: "required" });
  check(b.status === 400 && b.error?.param === "tool_choice", `required without tools: ${show(b)}`);
  b = await bad({ messages: MSGS, top_logprobs: 2 });
  check(b.status === 400 && b.error?.param === "top_logprobs", `top_logprobs without logprobs: ${show(b)}`);
  b = await bad({ messages: MSGS, logprobs: true, top_logprobs: 21 });
  check(b.status === 400 && b.error?.param === "top_logprobs" && /\[0, 20\]/.test(b.error.message), `top_logprobs 21: ${show(b)}`);
  b = await bad({ messages: MSGS, logprobs: 1 });
  check(b.status === 400 && b.error?.param === "logprobs", `logprobs not a boolean: ${show(b)}`);
  b = await bad({ messages: MSGS, chat_template_kwargs: 3 });
  check(b.status === 400 && b.error?.param === "chat_template_kwargs", `kwargs type: ${show(b)}`);
  srv.proc.kill("SIGTERM");

  // ---- tools and thinking through the qwen3 template -----------------------------------------
  const q = await startServer(["--chat-template", "qwen3"]);
  const qa = new OpenAI({ baseURL: `http://127.0.0.1:${q.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 30000 });
  const TOOLS = [{ type: "function", function: { name: "get_weather", description: "Weather in a city",
                   parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
  const USER = [{ role: "user", content: "What is the weather in Paris?" }];
  const refTools = reference(USER, { template: "qwen3", tools: TOOLS, n: 8 });
  check(refTools.prompt.includes("<tools>") && refTools.prompt.includes("\"get_weather\""),
        `qwen3 renders the tools: ${show(refTools.prompt)}`);
  const t1 = await qa.chat.completions.create({ model: "x", messages: USER, tools: TOOLS, max_tokens: 8,
                                                temperature: 0 });
  check(t1.usage.prompt_tokens === refTools.nTokens && t1.choices[0].message.content === refTools.text,
        `tools in the prompt: ${t1.usage.prompt_tokens} tokens vs ${refTools.nTokens}, ` +
        `${show(t1.choices[0].message.content)} vs ${show(refTools.text)}`);
  const refNone = reference(USER, { template: "qwen3", n: 8 });
  const t2 = await qa.chat.completions.create({ model: "x", messages: USER, tools: TOOLS, tool_choice: "none",
                                                max_tokens: 8, temperature: 0 });
  check(t2.usage.prompt_tokens === refNone.nTokens && refNone.nTokens < refTools.nTokens &&
        t2.choices[0].message.content === refNone.text, `tool_choice none: ${show(t2.usage)} vs ${refNone.nTokens}`);
  // a named tool_choice starts the reply with that call: the prompt is longer by the call's start
  const t3 = await qa.chat.completions.create({ model: "x", messages: USER, tools: TOOLS, max_tokens: 4, temperature: 0,
                                                tool_choice: { type: "function", function: { name: "get_weather" } } });
  check(t3.usage.prompt_tokens > refTools.nTokens && ["tool_calls", "length"].includes(t3.choices[0].finish_reason),
        `named tool_choice: ${show(t3)}`);

  const refNoThink = reference(USER, { template: "qwen3", vars: ["enable_thinking=false"], n: 8 });
  check(refNoThink.prompt.endsWith("<think>\n\n</think>\n\n"), `qwen3 without thinking: ${show(refNoThink.prompt)}`);
  const t4 = await qa.chat.completions.create({ model: "x", messages: USER, max_tokens: 8, temperature: 0,
                                                chat_template_kwargs: { enable_thinking: false } });
  check(t4.usage.prompt_tokens === refNoThink.nTokens && t4.choices[0].message.content === refNoThink.text,
        `chat_template_kwargs.enable_thinking: ${show(t4.usage)} vs ${refNoThink.nTokens}`);
  const qo = new Ollama({ host: `http://127.0.0.1:${q.port}` });
  const o4 = await qo.chat({ model: "x", messages: USER, think: false, stream: false,
                             options: { num_predict: 8, temperature: 0 } });
  check(o4.prompt_eval_count === refNoThink.nTokens && o4.message.content === refNoThink.text,
        `ollama think:false: ${o4.prompt_eval_count} vs ${refNoThink.nTokens}`);
  const o5 = await qo.chat({ model: "x", messages: USER, tools: TOOLS, stream: false,
                             options: { num_predict: 8, temperature: 0 } });
  check(o5.prompt_eval_count === refTools.nTokens && o5.message.content === refTools.text,
        `ollama tools: ${o5.prompt_eval_count} vs ${refTools.nTokens}`);
  const shown = await qo.show({ model: "stories260K" });
  check(shown.capabilities?.includes("tools") && shown.template.includes("<tool_call>"), `show: ${show(shown.capabilities)}`);
  q.proc.kill("SIGTERM");

  // ---- a template that writes BOS itself (llama3): the prompt has one BOS, not two ---------------
  const l3 = await startServer(["--chat-template", "llama3"]);
  const refL3 = reference(MSGS, { template: "llama3", dropBos: true });
  const r6 = await new OpenAI({ baseURL: `http://127.0.0.1:${l3.port}/v1`, apiKey: "none", maxRetries: 0 })
    .chat.completions.create({ model: "x", messages: MSGS, max_tokens: N, temperature: 0 });
  check(r6.usage.prompt_tokens === refL3.nTokens && r6.choices[0].message.content === refL3.text,
        `llama3 BOS: ${r6.usage.prompt_tokens} tokens vs ${refL3.nTokens}, ${show(r6.choices[0].message.content)} vs ` +
        `${show(refL3.text)}`);
  l3.proc.kill("SIGTERM");

  // ---- reasoning: a template whose reply starts inside <think> (as DeepSeek-R1's) --------------
  // stories260K never closes the block, so all it writes is reasoning, streamed as deltas.
  const thinkFile = path.join(tmp, "think.jinja");
  fs.writeFileSync(thinkFile, "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}" +
                              "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}");
  const refThink = reference(MSGS, { file: thinkFile });
  check(refThink.prompt.endsWith("<think>\n") && refThink.text.trim().length > 10 && !refThink.text.includes("</think>"), `think render: ${show(refThink.prompt)}`);
  const th = await startServer(["--chat-template-file", thinkFile]);
  const ta = new OpenAI({ baseURL: `http://127.0.0.1:${th.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 30000 });
  const r5 = await ta.chat.completions.create({ model: "x", messages: MSGS, max_tokens: N, temperature: 0 });
  check(r5.choices[0].message.reasoning_content === refThink.text.trim() && r5.choices[0].message.content === "",
        `reasoning_content: ${show(r5.choices[0].message)} vs ${show(refThink.text)}`);
  const s5 = await ta.chat.completions.create({ model: "x", messages: MSGS, max_tokens: N, temperature: 0, stream: true });
  let reasoning = "", content5 = "", n5 = 0;
  for await (const ch of s5) {
    if (++n5 > 10000) break;
    reasoning += ch.choices[0]?.delta?.reasoning_content ?? "";
    content5 += ch.choices[0]?.delta?.content ?? "";
  }
  check(reasoning === refThink.text.trim() && content5 === "", `streamed reasoning: ${show(reasoning)} / ${show(content5)}`);
  const o6 = await new Ollama({ host: `http://127.0.0.1:${th.port}` }).chat({
    model: "x", messages: MSGS, stream: false, options: { num_predict: N, temperature: 0 } });
  check(o6.message.thinking === refThink.text.trim() && o6.message.content === "", `ollama thinking: ${show(o6.message)}`);
  th.proc.kill("SIGTERM");
} catch (e) {
  check(false, `unexpected: ${e.stack ?? e}`);
}
clearTimeout(watchdog);
cleanup();
finish();
