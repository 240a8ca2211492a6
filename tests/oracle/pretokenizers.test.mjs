// Pre-tokenizer oracle: every tokenizer.ggml.pre name llama.cpp knows.
//
// For each name, the GPT-2 vocabulary of shared/vocab is written again into a
// temp dir with only tokenizer.ggml.pre changed (and once with
// tokenizer.ggml.model = "gemma4"), and a corpus made for pre-tokenizers
// (scripts, marks, emoji and ZWJ sequences, digits of every length,
// whitespace runs, code, contractions, punctuation, the chameleon and kimi-k2
// cases) is tokenized by llama.cpp itself (node-llama-cpp), with
// parse_special off and on.  pocketlm must give the same ids for every text
// (test_tokenizer's vector mode, and for a few names `pocketlm tokenize
// --lines`), and agree on add_bos.  A name llama.cpp cannot load is reported, and an
// unknown name must be refused by both.
//
// Run: node tests/oracle/pretokenizers.test.mjs
//   PLM_TEST_TOKENIZER=path/to/test_tokenizer  the binary (default: beside POCKETLM_BIN)
//   PLM_PRETOK_ONLY=name,name                  only these names
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BIN, SHARED, llama, check, finish, pocketlm } from "./lib.mjs";
import { T, readGGUFMeta, ggufBytes, withKey } from "./tokenizer_gguf.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));

// Every name llama.cpp's llama_vocab::impl::load accepts for a "gpt2" model
// (node-llama-cpp 3.21.1's llama.cpp), in its order.
const PRE_NAMES = [
  "default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
  "midm-2.0", "lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3", "youtu",
  "falcon", "mpt", "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
  "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jais-2", "gemma4", "granite-embed-multi-311m",
  "sarvam-moe", "jina-v1-en", "jina-v2-code", "roberta-bpe", "whitespace", "refact", "command-r",
  "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35", "stablelm2", "olmo", "dbrx",
  "smaug-bpe", "poro-chat", "glm4", "chatglm-bpe", "viking", "jais", "tekken", "smollm",
  "codeshell", "bloom", "gpt3-finnish", "exaone", "exaone4", "exaone-moe", "chameleon",
  "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2", "talkie", "granite-embed-multi-97m",
  "tiny_aya", "cohere2moe", "superbpe", "trillion", "granite-docling", "bailingmoe", "bailingmoe2",
  "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense", "joyai-llm", "kimi-k2", "grok-2", "afmoe",
  "laguna", "minimax-m2", "solar-open", "mellum2",
];

// These also go through the command line tool, one process for all texts.
const CLI_NAMES = ["gpt-2", "llama3", "qwen2", "deepseek-llm", "chameleon", "kimi-k2", "afmoe", "gemma4"];

function findBinary() {
  if (process.env.PLM_TEST_TOKENIZER) return process.env.PLM_TEST_TOKENIZER;
  const dirs = [path.dirname(BIN)];
  for (const d of fs.readdirSync(path.join(here, "../.."))) if (d.startsWith("build")) dirs.push(path.join(here, "../..", d));
  for (const dir of dirs) {
    const p = path.join(dir, "test_tokenizer");
    if (fs.existsSync(p)) return p;
  }
  throw new Error("test_tokenizer not found: build it or set PLM_TEST_TOKENIZER");
}
const TOKENIZER_BIN = findBinary();
const SEP = "\n__ggml_vocab_test__\n";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "plm-pretok-"));

// ---- the corpus ----------------------------------------------------------------

function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const digits = "12345678901234567890";
const CASES = [
  // digits of every length, alone and inside words, other number kinds
  ...Array.from({ length: 20 }, (_, i) => digits.slice(0, i + 1)),
  "a1b22c333d4444e55555", "x 123456 y", "12,345.67", "3.14159", "v2.0.1", "0x1F", "٣٤٥٦٧", "१२३४", "½²³", "ⅫⅣ", "１２３４５",
  // whitespace runs of every kind
  " ", "  ", "   ", "    ", "     x", "x     ", "a  b   c    d", "\t", "\t\t", "\tx", "\n", "\n\n\n", "\r\n", "\r\n\r\n",
  " \n ", "  \n  x", "x \t\n y", "\u00a0", "a\u00a0b", "\u3000x", "\u2009\u2009", "\u0085", "\u2028", "\u1680x", "\u202f",
  "\v\f", "\x1c\x1d\x1e\x1f", " ".repeat(600) + "x", "\n".repeat(7) + "y", "x" + " ".repeat(17) + "\n",
  // contractions
  "I'm", "you're", "WE'VE", "they'LL", "she'd", "It'S", "'s", "'t", "'", "''s", "x'd'", "O'Neil's", "DON'T", "l'homme",
  // cased words
  "HTTPServer", "iPhone", "McDonald's", "ÉCOLE école", "ǅemal", "ΣΊΣΥΦΟΣ σίσυφος", "camelCaseWord", "snake_case_word",
  // punctuation and symbols
  "?!...", "---", "///", "a/b/c/", "http://x.y/z?q=1&r=2", "~~~", "~x", "`code`", "$100", "^_^", "<=>", "|||", "\\\\",
  "@#%&*", "(a)[b]{c}", "«»", "“quoted”", "—", "…", "、。〃", "！：；，", "¿¡", "§¶", "©®™", "€£¥₿", "+-×÷=≠",
  // scripts
  "Привет, мир!", "Ελληνικά", "עִבְרִית", "مَرْحَبًا بالعالم", "नमस्ते दुनिया", "নমস্কার", "வணக்கம்", "తెలుగు", "สวัสดีครับ",
  "ສະບາຍດີ", "ភាសាខ្មែរ", "မြန်မာ", "ქართული", "Հայերեն", "ሰላም", "日本語のテキスト", "中文字符测试", "한국어 텍스트", "ᄀᄁᄂ", "ㄱㄴㄷ",
  "ㄅㄆㄇ", "ｱｲｳｴｵ", "ｶﾞｷﾞ", "⿰⿼⿿", "㇯", "𠀀𠀁𪜀", "𮯰𮯱", "豈更", "丽丸", "ꩠꩡ", "ꧠꧡ", "Ａｂｃ", "ﬁﬂ",
  // marks
  "e\u0301", "a\u0308\u0323", "\u0301x", "x\u20dd", "A\u0300B\u0301", "Zalgo: Z\u0351\u0352\u0353o",
  // emoji
  "🦙", "🚀🚀", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🏳️‍⚧️", "🇯🇵🇺🇸", "👍🏽", "1️⃣", "❤️", "😶‍🌫️", "🫠",
  // code
  "def f(x):\n    return x**2\n", "int main() {\n\treturn 0;\n}\n", "for (i = 0; i < 10; i++) {}", "<div class=\"a\">",
  "x+=1;", "#include <stdio.h>", "    indented", "\t\tindented", "a == b && c != d", "//comment\n/* c */",
  // chameleon and special-looking texts
  "<sentinel:0>", "<sentinel:123>x", "IMGIMGABCDZ", "IMGIMGAZ", "IMGIMGABCDEZ", "<|endoftext|>", "a<|endoftext|>b",
  "<s>", "</s>", "▁", "▁▁Hello", "[EOT]",
  // odd codepoints
  "\u200b\u200c\u200d", "\ufeff", "\ue000", "\u0378", "\u{10FFFF}", "\u{E0001}", "\u180e", "\u00ad",
];

// Texts: each case alone, then random mixes of cases and short joiners.
function corpus(seed, mixes) {
  const r = rng(seed), texts = [...CASES];
  const joiners = ["", " ", "  ", "\n", "\t", ", ", ". ", "'", "/"];
  for (let i = 0; i < mixes; i++) {
    let s = "";
    const k = 2 + Math.floor(r() * 6);
    for (let j = 0; j < k; j++) s += joiners[Math.floor(r() * joiners.length)] + CASES[Math.floor(r() * CASES.length)];
    texts.push(s);
  }
  return texts.filter((t) => !t.includes(SEP));
}

// ---- running both ---------------------------------------------------------------

function runPocketlm(gguf, texts, ids, special, tag) {
  const inp = path.join(tmp, `${tag}.inp`), out = path.join(tmp, `${tag}.out`);
  fs.writeFileSync(inp, texts.map((t) => t + SEP).join(""));
  fs.writeFileSync(out, ids.map((l) => l.map((i) => " " + i).join("") + "\n").join(""));
  const r = spawnSync(TOKENIZER_BIN, ["vectors", gguf, inp, out, ...(special ? ["special"] : [])],
                      { encoding: "utf8", maxBuffer: 1 << 28 });
  const m = /(\d+)\/(\d+) texts exact/.exec(r.stdout ?? "");
  return { ok: m ? Number(m[1]) : 0, log: (r.stdout ?? "") + (r.stderr ?? "") };
}

function pocketlmHeader(gguf) {
  const r = spawnSync(TOKENIZER_BIN, ["dump", gguf], { encoding: "utf8", maxBuffer: 1 << 30 });
  if (r.status !== 0) return { error: (r.stderr ?? "").trim() || `exit ${r.status}` };
  const [n, bos, eos, eot, wantsBos] = r.stdout.slice(0, r.stdout.indexOf("\n")).split(" ").map(Number);
  return { n, bos, eos, eot, wantsBos: Boolean(wantsBos) };
}

const base = readGGUFMeta(path.join(SHARED, "vocab", "ggml-vocab-gpt-2.gguf"));
const only = process.env.PLM_PRETOK_ONLY?.split(",");
const variants = PRE_NAMES.filter((n) => !only || only.includes(n)).map((name) => ({
  name, kvs: withKey(base.kvs, "tokenizer.ggml.pre", T.STR, name),
}));
if (!only || only.includes("model=gemma4"))
  variants.push({ name: "model=gemma4", kvs: withKey(base.kvs, "tokenizer.ggml.model", T.STR, "gemma4") });

console.log(`using ${TOKENIZER_BIN}; ${variants.length} vocabularies`);
const l = await llama();
const cannotLoad = [];
let seed = 1;
for (const v of variants) {
  const gguf = path.join(tmp, `pre-${v.name.replace(/[^a-z0-9.-]/gi, "_")}.gguf`);
  fs.writeFileSync(gguf, ggufBytes(v.kvs));
  let model;
  try {
    model = await l.loadModel({ modelPath: gguf, vocabOnly: true });
  } catch (e) {
    cannotLoad.push(`${v.name} (${String(e.message ?? e).split("\n")[0]})`);
    continue;
  }
  const head = pocketlmHeader(gguf);
  check(!head.error, `${v.name}: pocketlm cannot load what llama.cpp loads: ${head.error}`);
  if (head.error) { await model.dispose(); continue; }
  check(head.wantsBos === model._model.shouldPrependBosToken(),
        `${v.name}: add_bos ${head.wantsBos}, llama.cpp ${model._model.shouldPrependBosToken()}`);
  let texts = corpus(seed++, 150);
  // llama.cpp aborts (GGML_ASSERT in find_bpe_rank) when a merge candidate
  // holds a raw space, which "whitespace" leaves in its blank runs
  if (v.name === "whitespace") texts = texts.filter((t) => !/[\s\u0085]{2,}/.test(t));
  const results = [];
  for (const special of [false, true]) {
    const want = texts.map((t) => model.tokenize(t, special));
    const { ok, log } = runPocketlm(gguf, texts, want, special, `${v.name}-${special}`);
    check(ok === texts.length, `${v.name}: parse_special=${special}: ${ok}/${texts.length} texts as llama.cpp\n${log.slice(0, 3000)}`);
    check(!/Sanitizer/.test(log), `${v.name}: test_tokenizer reports a sanitizer error\n${log.slice(-3000)}`);
    results.push(`parse_special ${special ? "on" : "off"} ${ok}/${texts.length}`);
  }
  if (CLI_NAMES.includes(v.name)) { // the same through `pocketlm tokenize --lines`
    const one = texts.filter((t) => !t.includes("\n"));
    const file = path.join(tmp, `${v.name}.lines`);
    fs.writeFileSync(file, one.join("\n") + "\n");
    const r = pocketlm(["tokenize", "-m", gguf, "-f", file, "--lines"]);
    const got = r.stdout.split("\n").slice(0, -1);
    const good = one.filter((t, i) => got[i] === Array.from(model.tokenize(t, false)).join(" ")).length;
    check(r.status === 0 && got.length === one.length && good === one.length,
          `${v.name}: pocketlm tokenize --lines: ${good}/${one.length} lines as llama.cpp (${got.length} printed) ${r.stderr}`);
    results.push(`pocketlm tokenize --lines ${good}/${one.length}`);
  }
  console.log(`${v.name.padEnd(26)} identical ids: ${results.join(", ")}; add_bos ${head.wantsBos}`);
  await model.dispose();
}

// A name llama.cpp does not know: both refuse it.
{
  const gguf = path.join(tmp, "pre-unknown.gguf");
  fs.writeFileSync(gguf, ggufBytes(withKey(base.kvs, "tokenizer.ggml.pre", T.STR, "no-such-pre")));
  let refused = false;
  try { await (await l.loadModel({ modelPath: gguf, vocabOnly: true })).dispose(); } catch { refused = true; }
  const head = pocketlmHeader(gguf);
  check(refused && /unknown pre-tokenizer type 'no-such-pre'/.test(head.error ?? ""),
        `unknown pre name: llama.cpp refused ${refused}, pocketlm said ${head.error ?? "nothing"}`);
}

if (cannotLoad.length) console.log(`llama.cpp itself cannot load: ${cannotLoad.join("; ")}`);
check(cannotLoad.length === 0, `llama.cpp cannot load ${cannotLoad.length} names`);
fs.rmSync(tmp, { recursive: true, force: true });
finish();
