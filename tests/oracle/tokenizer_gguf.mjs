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
