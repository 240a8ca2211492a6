// GGUF metadata for the tokenizer oracles: read every key of a tensor-free
// vocabulary GGUF, and write such a file back, so a test can change a key
// (tokenizer.ggml.pre, tokenizer.ggml.model, ...) or build a vocabulary from
// scratch.  Only files without tensors: that is all a vocabulary needs.
import fs from "node:fs";

export const T = {
  U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9, U64: 10, I64: 11, F64: 12,
};
const SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

// -> { version, kvs: [[key, type, value, elemType]] } (the writer's format)
export function readGGUFMeta(file) {
  const b = fs.readFileSync(file);
  let o = 0;
  const u32 = () => { const v = b.readUInt32LE(o); o += 4; return v; };
  const u64 = () => { const v = Number(b.readBigUInt64LE(o)); o += 8; return v; };
  const str = () => { const n = u64(); const s = b.toString("utf8", o, o + n); o += n; return s; };
  const scalar = (t) => {
    const at = o;
    o += SIZE[t];
    switch (t) {
      case T.U8: return b.readUInt8(at);
      case T.I8: return b.readInt8(at);
      case T.U16: return b.readUInt16LE(at);
      case T.I16: return b.readInt16LE(at);
      case T.U32: return b.readUInt32LE(at);
      case T.I32: return b.readInt32LE(at);
      case T.F32: return b.readFloatLE(at);
      case T.BOOL: return b.readUInt8(at) !== 0;
      case T.U64: return b.readBigUInt64LE(at);
      case T.I64: return b.readBigInt64LE(at);
      case T.F64: return b.readDoubleLE(at);
      default: throw new Error(`${file}: unknown GGUF type ${t}`);
    }
  };
  if (b.toString("latin1", 0, 4) !== "GGUF") throw new Error(`${file}: not a GGUF file`);
  o = 4;
  const version = u32();
  const nTensors = u64(), nKv = u64();
  if (nTensors !== 0) throw new Error(`${file}: has ${nTensors} tensors; only vocabulary files are supported`);
  const kvs = [];
  for (let i = 0; i < nKv; i++) {
    const key = str(), type = u32();
    if (type === T.STR) kvs.push([key, type, str()]);
    else if (type === T.ARR) {
      const et = u32(), n = u64(), v = new Array(n);
      for (let k = 0; k < n; k++) v[k] = et === T.STR ? str() : scalar(et);
      kvs.push([key, type, v, et]);
    } else kvs.push([key, type, scalar(type)]);
  }
  return { version, kvs };
}

export function ggufBytes(kvs) {
  const parts = [];
  const num = (t, v) => {
    const b = Buffer.alloc(SIZE[t]);
    switch (t) {
      case T.U8: b.writeUInt8(v); break;
      case T.I8: b.writeInt8(v); break;
      case T.U16: b.writeUInt16LE(v); break;
      case T.I16: b.writeInt16LE(v); break;
      case T.U32: b.writeUInt32LE(v); break;
      case T.I32: b.writeInt32LE(v); break;
      case T.F32: b.writeFloatLE(v); break;
      case T.BOOL: b.writeUInt8(v ? 1 : 0); break;
      case T.U64: b.writeBigUInt64LE(BigInt(v)); break;
      case T.I64: b.writeBigInt64LE(BigInt(v)); break;
      case T.F64: b.writeDoubleLE(v); break;
      default: throw new Error(`unknown GGUF type ${t}`);
    }
    parts.push(b);
  };
  const str = (s) => { const b = Buffer.from(s, "utf8"); num(T.U64, b.length); parts.push(b); };
  parts.push(Buffer.from("GGUF"));
  num(T.U32, 3);
  num(T.U64, 0); // tensors
  num(T.U64, kvs.length);
  for (const [key, type, value, elemType] of kvs) {
    str(key);
    num(T.U32, type);
    if (type === T.STR) str(value);
    else if (type === T.ARR) {
      num(T.U32, elemType);
      num(T.U64, value.length);
      for (const v of value) elemType === T.STR ? str(v) : num(elemType, v);
    } else num(type, value);
  }
  const size = parts.reduce((n, b) => n + b.length, 0);
  parts.push(Buffer.alloc((32 - (size % 32)) % 32)); // align the (empty) data section
  return Buffer.concat(parts);
}

// A copy of `kvs` with `key` set to [type, value] (added when absent).
export function withKey(kvs, key, type, value) {
  const out = kvs.filter(([k]) => k !== key);
  const at = kvs.findIndex(([k]) => k === key);
  out.splice(at < 0 ? out.length : at, 0, [key, type, value]);
  return out;
}

// ---- HF tokenizer.json -> vocabulary GGUF, as llama.cpp's converter does ----

// gguf-py's does_token_look_special
export function looksSpecial(t) {
  return ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(t) ||
    (t.startsWith("<|") && t.endsWith("|>")) || (t.startsWith("<｜") && t.endsWith("｜>")) ||
    (t.startsWith("<start_of_") && t.endsWith(">")) || (t.startsWith("<end_of_") && t.endsWith(">"));
}

const tokenText = (x) => (x == null ? null : typeof x === "string" ? x : x.content);

// tokenizer.json and tokenizer_config.json of an npm tokenizer package
// (its "exports" hide models/, so it is read by path).
export function readHF(dir) {
  return {
    tj: JSON.parse(fs.readFileSync(`${dir}/models/tokenizer.json`, "utf8")),
    cfg: JSON.parse(fs.readFileSync(`${dir}/models/tokenizer_config.json`, "utf8")),
  };
}

// Placeholder metadata llama.cpp needs to accept a vocabulary-only file.
function llamaHeader(name, n) {
  return [
    ["general.architecture", T.STR, "llama"],
    ["general.name", T.STR, name],
    ["llama.context_length", T.U32, 4096],
    ["llama.embedding_length", T.U32, 4096],
    ["llama.block_count", T.U32, 32],
    ["llama.feed_forward_length", T.U32, 14336],
    ["llama.attention.head_count", T.U32, 32],
    ["llama.attention.head_count_kv", T.U32, 8],
    ["llama.attention.layer_norm_rms_epsilon", T.F32, 1e-5],
    ["llama.rope.dimension_count", T.U32, 128],
    ["llama.vocab_size", T.U32, n],
  ];
}

function specialIds(tokens, cfg, kvs) {
  const idOf = (x) => (tokenText(x) == null ? -1 : tokens.indexOf(tokenText(x)));
  for (const [key, x] of [["bos", cfg.bos_token], ["eos", cfg.eos_token], ["padding", cfg.pad_token],
                          ["unknown", cfg.unk_token]]) {
    const id = idOf(x);
    if (id >= 0) kvs.push([`tokenizer.ggml.${key}_token_id`, T.U32, id]);
  }
  if (typeof cfg.add_bos_token === "boolean") kvs.push(["tokenizer.ggml.add_bos_token", T.BOOL, cfg.add_bos_token]);
  if (typeof cfg.add_eos_token === "boolean") kvs.push(["tokenizer.ggml.add_eos_token", T.BOOL, cfg.add_eos_token]);
}

// Byte-level BPE (Llama 3, Qwen): tokens, token types, merges, special ids.
export function bpeVocabKvs({ tj, cfg }, pre) {
  const added = new Map(tj.added_tokens.map((t) => [t.id, t]));
  const n = [...Object.values(tj.model.vocab), ...added.keys()].reduce((a, b) => Math.max(a, b), -1) + 1;
  const tokens = new Array(n), types = new Array(n);
  for (let i = 0; i < n; i++) { tokens[i] = `[PAD${i}]`; types[i] = 5; } // unused padding
  for (const [text, id] of Object.entries(tj.model.vocab)) { tokens[id] = text; types[id] = 1; }
  for (const [id, t] of added) {
    tokens[id] = t.content;
    types[id] = t.special || looksSpecial(t.content) ? 3 : 4; // control : user-defined
  }
  const merges = tj.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  const kvs = [
    ...llamaHeader(pre, n),
    ["tokenizer.ggml.model", T.STR, "gpt2"],
    ["tokenizer.ggml.pre", T.STR, pre],
    ["tokenizer.ggml.tokens", T.ARR, tokens, T.STR],
    ["tokenizer.ggml.token_type", T.ARR, types, T.I32],
    ["tokenizer.ggml.merges", T.ARR, merges, T.STR],
  ];
  specialIds(tokens, cfg, kvs);
  return { kvs, n, merges: merges.length, added: added.size };
}

// SentencePiece BPE with byte fallback (Gemma), from the HF BPE conversion of
// its tokenizer.model: the pieces keep their ids; the score that orders
// SentencePiece's merges is -id (SentencePiece numbers its BPE pieces in
// merge order); <0xNN> pieces are bytes; added tokens are control when
// special, else user-defined with U+2581 read back as a space.
export function spmVocabKvs({ tj, cfg }, name) {
  const added = new Map(tj.added_tokens.map((t) => [t.id, t]));
  const n = [...Object.values(tj.model.vocab), ...added.keys()].reduce((a, b) => Math.max(a, b), -1) + 1;
  const tokens = new Array(n), types = new Array(n), scores = new Array(n);
  for (let i = 0; i < n; i++) { tokens[i] = `[PAD${i}]`; types[i] = 5; scores[i] = 0; }
  for (const [text, id] of Object.entries(tj.model.vocab)) {
    tokens[id] = text;
    types[id] = /^<0x[0-9A-F]{2}>$/.test(text) ? 6 : 1;
    scores[id] = types[id] === 1 ? -id : 0;
  }
  for (const [id, t] of added) {
    if (t.special || looksSpecial(t.content)) { tokens[id] = t.content; types[id] = 3; }
    else { tokens[id] = t.content.replaceAll("\u2581", " "); types[id] = 4; }
    scores[id] = types[id] === 4 ? -1000 : 0;
  }
  const unk = tokens.indexOf(tokenText(cfg.unk_token));
  if (unk >= 0) types[unk] = 2;
  const kvs = [
    ...llamaHeader(name, n),
    ["tokenizer.ggml.model", T.STR, "llama"],
    ["tokenizer.ggml.pre", T.STR, "default"],
    ["tokenizer.ggml.tokens", T.ARR, tokens, T.STR],
    ["tokenizer.ggml.scores", T.ARR, scores, T.F32],
    ["tokenizer.ggml.token_type", T.ARR, types, T.I32],
    ["tokenizer.ggml.add_space_prefix", T.BOOL, false],
  ];
  specialIds(tokens, cfg, kvs);
  return { kvs, n, added: added.size };
}

// Gemma 4's layout of the same kind of vocabulary: tokenizer.ggml.model
// "gemma4", BPE merges over raw UTF-8 with U+2581 for spaces and <0xNN> byte
// tokens (here from Gemma 3's tokenizer.json, which is that kind of BPE).
export function gemma4VocabKvs({ tj, cfg }, name) {
  const added = new Map(tj.added_tokens.map((t) => [t.id, t]));
  const n = [...Object.values(tj.model.vocab), ...added.keys()].reduce((a, b) => Math.max(a, b), -1) + 1;
  const tokens = new Array(n), types = new Array(n);
  for (let i = 0; i < n; i++) { tokens[i] = `[PAD${i}]`; types[i] = 5; }
  for (const [text, id] of Object.entries(tj.model.vocab)) {
    tokens[id] = text;
    types[id] = /^<0x[0-9A-F]{2}>$/.test(text) ? 6 : 1;
  }
  for (const [id, t] of added) { // user-defined ones are matched in the raw, unescaped text
    types[id] = t.special || looksSpecial(t.content) ? 3 : 4;
    tokens[id] = types[id] === 4 ? t.content.replaceAll("\u2581", " ") : t.content;
  }
  const merges = tj.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  const kvs = [
    ...llamaHeader(name, n),
    ["tokenizer.ggml.model", T.STR, "gemma4"],
    ["tokenizer.ggml.tokens", T.ARR, tokens, T.STR],
    ["tokenizer.ggml.token_type", T.ARR, types, T.I32],
    ["tokenizer.ggml.merges", T.ARR, merges, T.STR],
  ];
  specialIds(tokens, cfg, kvs);
  return { kvs, n, merges: merges.length, added: added.size };
}
