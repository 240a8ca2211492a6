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
// has its own unit test (tests/test_tool_calls.c).  Every loop is bounded.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { Ollama } from "ollama";
import { SHARED, pocketlm, check, finish, startServer as startServerIn, killServers } from "./lib.mjs";

const MODEL = path.join(SHARED, "models/stories260K.gguf");
const N = 24;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "plm-serve-chat-"));

const startServer = (extra = []) => startServerIn(["-m", MODEL, "-c", "1024", "-t", "1", ...extra]);

function cleanup() {
  killServers();
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.on("exit", cleanup);
const watchdog = setTimeout(() => { console.error("FAIL: the test ran past 120 s"); cleanup(); process.exit(1); }, 120000);

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
