// pocketlm smoke: the verdicts, the saved-run round trip, bad inputs, and the
// KL divergence and top-1 agreement recomputed from llama.cpp's own
// probabilities (node-llama-cpp, teacher-forced through the base's saved
// answer) for the fixture f16 base against its Q4_K_M quantization.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { SHARED, pocketlm, llama, check, finish } from "./lib.mjs";

const FIX = path.join(SHARED, "models/fixtures");
const F16 = path.join(FIX, "fixture-llama-f16.gguf");
const Q2K = path.join(FIX, "fixture-llama-pure-Q2_K.gguf");
const Q4KM = path.join(FIX, "fixture-llama-Q4_K_M.gguf");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "plm-smoke-"));
process.on("exit", () => fs.rmSync(tmp, { recursive: true, force: true }));
const N = "16";
const show = (s) => JSON.stringify(s);

// The report's tables: the summary rows and one row per prompt.
function parseReport(md) {
  const verdict = /^# pocketlm smoke: (PASS|FAIL)/m.exec(md)?.[1];
  const num = (re) => Number(re.exec(md)?.[1]);
  const rows = {};
  for (const m of md.matchAll(/^\| (\S+) \| (\w+) \| (\d+) \| (\d+) \/ (\d+) \| ([^|]+) \| ([\d.]+)% \| ([\d.]+) \| ([\d.]+) \|$/gm))
    rows[m[1]] = { nPrompt: +m[3], nBase: +m[4], nCand: +m[5], div: m[6].trim(), top1: +m[7], kld: +m[8], max: +m[9] };
  return { verdict, meanKld: num(/^\| mean KLD \| ([\d.]+)/m), top1: num(/^\| top-1 agreement \| ([\d.]+)%/m), rows };
}

function smoke(args) {
  const out = path.join(tmp, `r${Math.random().toString(36).slice(2)}.md`);
  const r = pocketlm(["smoke", "-n", N, "-t", "1", "-o", out, ...args]);
  const md = fs.existsSync(out) ? fs.readFileSync(out, "utf8") : "";
  return { status: r.status, stderr: r.stderr, md, rep: parseReport(md) };
}

// ---- verdicts --------------------------------------------------------------------

const self = smoke(["-m", F16]);
check(self.status === 0 && self.rep.verdict === "PASS" && self.rep.meanKld === 0 && self.rep.top1 === 100,
      `f16 against itself: ${self.status} ${show(self.rep)} ${self.stderr}`);
check(Object.keys(self.rep.rows).length === 14 && Object.values(self.rep.rows).every((r) => r.div === "none"),
      `every prompt of data/smoke.jsonl, no divergence: ${show(self.rep.rows)}`);

const q2 = smoke(["-m", F16, "--candidate", Q2K]);
check(q2.status === 2 && q2.rep.verdict === "FAIL" && q2.rep.meanKld > 0.1 && q2.rep.top1 < 90,
      `f16 against pure Q2_K must fail: ${q2.status} ${show({ kld: q2.rep.meanKld, top1: q2.rep.top1 })} ${q2.stderr}`);
check(/FAIL: mean KLD/.test(q2.stderr) && q2.md.includes("## Answers side by side") && q2.md.includes("**‖**"),
      "the FAIL line on stderr, answers side by side with the divergence marked");

// a KV cache type as the candidate: the same weights, another context
const kv = smoke(["-m", F16, "-ctk", "q4_0", "-ctv", "q4_0"]);
check((kv.status === 0 || kv.status === 2) && kv.rep.meanKld > 0 && kv.md.includes("KV cache q4_0/q4_0"),
      `q4_0 cache candidate: ${kv.status} ${show(kv.rep.meanKld)} ${kv.stderr}`);
// another kernel table: the reference kernels against the CPU's
const ref = smoke(["-m", F16, "--kernels", "ref"]);
check(ref.status === 0 && ref.md.includes("kernels ref") && ref.rep.meanKld < 1e-3 && ref.rep.top1 >= 90,
      `reference kernels candidate: ${ref.status} ${show(ref.rep.meanKld)} ${ref.stderr}`);
const thresholds = smoke(["-m", F16, "-ctk", "q4_0", "-ctv", "q4_0", "--max-kld", "0", "--min-top1", "1"]);
check(thresholds.status === 2 && thresholds.rep.verdict === "FAIL", `stricter thresholds fail: ${thresholds.status}`);

// ---- --save / --against ------------------------------------------------------------

const saved = path.join(tmp, "base.smoke");
const sv = pocketlm(["smoke", "-m", F16, "-n", N, "-t", "1", "--save", saved]);
check(sv.status === 0 && fs.existsSync(saved) && !fs.existsSync(`${saved}.tmp`), `--save: ${sv.stderr}`);
const direct = smoke(["-m", F16, "--candidate", Q4KM]);
const against = smoke(["-m", Q4KM, "--against", saved]);
check(direct.status === against.status && direct.rep.meanKld > 0 &&
      show(direct.rep.rows) === show(against.rep.rows) && direct.rep.meanKld === against.rep.meanKld,
      `--against gives the numbers of the direct comparison:\n  ${show(direct.rep)}\n  ${show(against.rep)}`);
const selfSaved = smoke(["-m", F16, "--against", saved]);
check(selfSaved.status === 0 && selfSaved.rep.meanKld === 0 && selfSaved.rep.top1 === 100,
      `the base against its saved run: ${show(selfSaved.rep)} ${selfSaved.stderr}`);

// ---- bad inputs: exit 1 with a message naming the problem --------------------------

const bad = (args, re, what) => {
  const r = pocketlm(["smoke", "-n", "4", ...args]);
  check(r.status === 1 && re.test(r.stderr), `${what}: ${r.status} ${r.stderr}`);
};
const otherVocab = path.join(tmp, "gpt2-vocab.gguf");  // the fixtures share stories260K's vocabulary
const sy = pocketlm(["synth", "test-llama-tiny", "--vocab", path.join(SHARED, "vocab/ggml-vocab-gpt-2.gguf"), "-o", otherVocab]);
check(sy.status === 0, `synth: ${sy.stderr}`);
bad(["-m", otherVocab, "--against", saved], /vocabulary differs/, "another vocabulary");
const corrupt = path.join(tmp, "corrupt.smoke");
fs.writeFileSync(corrupt, fs.readFileSync(saved, "utf8").replace(/"top_k":\d+/, '"top_k":3'));
bad(["-m", F16, "--against", corrupt], /not a saved smoke run/, "rows of the wrong size");
fs.writeFileSync(corrupt, fs.readFileSync(saved, "utf8").slice(0, 1000));
bad(["-m", F16, "--against", corrupt], /not JSON/, "a truncated file");
const badSet = path.join(tmp, "bad.jsonl");
fs.writeFileSync(badSet, '{"prompt": "fine"}\n{"prompt": 3}\n');
bad(["-m", F16, "-f", badSet], /line 2/, "a bad set line");
bad(["-m", F16, "-ctk", "q3"], /unknown cache type 'q3'/, "a bad cache type");
bad(["-m", F16, "--kernels", "nosuch"], /--kernels nosuch/, "an unknown kernel table");
bad(["-m", F16, "--against", saved, "--save", corrupt], /--against/, "--save with --against");

// ---- the numbers against llama.cpp's probabilities -----------------------------------

// Teacher-forced: the value passed to the generator's next() is the token
// evaluated next, instead of the sampled one.
async function distributions(model, prompt, answer) {
  const context = await model.createContext({ contextSize: 512, threads: 1 });
  const seq = context.getSequence();
  const gen = seq.evaluateWithMetadata(prompt, { probabilities: true }, { temperature: 0 });
  const out = [];
  let r = await gen.next();
  for (let i = 0; i < answer.length && !r.done; i++) {
    out.push(r.value.probabilities);
    if (i + 1 < answer.length) r = await gen.next(answer[i]);
  }
  await gen.return();
  await context.dispose();
  return out;
}

// KL(base || candidate) over the base's 64 most probable tokens plus the rest
// as one bucket, as the report states it; from probabilities in double.
function kld(base, cand, k) {
  const top = [...base.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, k);
  let sum = 0, pTop = 0, qTop = 0;
  for (const [t, p] of top) {
    const q = cand.get(t);
    if (p > 0) sum += p * Math.log(p / q);
    pTop += p;
    qTop += q;
  }
  const pRest = 1 - pTop, qRest = 1 - qTop;
  if (pRest > 1e-12) sum += pRest * Math.log(pRest / Math.max(qRest, 1e-30));
  return Math.max(sum, 0);
}
const argmax = (m) => [...m.entries()].reduce((a, b) => (b[1] > a[1] ? b : a))[0];

try {
  const run = JSON.parse(fs.readFileSync(saved, "utf8"));
  check(run.format === "pocketlm-smoke" && run.top_k === 64 && run.prompts.length === 14, `saved run: ${run.format}`);
  const l = await llama();
  const base = await l.loadModel({ modelPath: F16 });
  const cand = await l.loadModel({ modelPath: Q4KM });
  let checked = 0;
  for (const p of run.prompts.slice(0, 3)) {
    const db = await distributions(base, p.prompt_tokens, p.answer);
    const dc = await distributions(cand, p.prompt_tokens, p.answer);
    check(db.length === p.answer.length && dc.length === p.answer.length, `${p.id}: ${db.length} distributions`);
    // llama.cpp's base agrees with the saved greedy answer and its probabilities
    const baseAgrees = p.answer.every((t, i) => argmax(db[i]) === t);
    const maxLpDiff = Math.max(...p.top_ids[0].map((t, j) => Math.abs(Math.log(db[0].get(t)) - p.top_logprobs[0][j])));
    check(baseAgrees && maxLpDiff < 1e-2, `${p.id}: llama.cpp's base vs the saved run: greedy ${baseAgrees}, ` +
          `ln p differs by ${maxLpDiff}`);
    let sum = 0, same = 0;
    for (let i = 0; i < db.length; i++) {
      sum += kld(db[i], dc[i], run.top_k);
      if (argmax(dc[i]) === p.answer[i]) same++;
    }
    const ours = direct.rep.rows[p.id];
    const theirs = sum / db.length, theirTop1 = (100 * same) / db.length;
    check(ours && Math.abs(ours.kld - theirs) <= 0.03 * theirs + 2e-6,
          `${p.id}: mean KLD ${ours?.kld} vs llama.cpp's ${theirs}`);
    check(ours && Math.abs(ours.top1 - theirTop1) <= 100 / db.length + 0.05,
          `${p.id}: top-1 ${ours?.top1}% vs llama.cpp's ${theirTop1}%`);
    console.log(`${p.id}: mean KLD ours ${ours?.kld} llama.cpp ${theirs.toFixed(6)}; top-1 ours ${ours?.top1}% ` +
                `llama.cpp ${theirTop1.toFixed(1)}%`);
    checked++;
  }
  check(checked === 3, "three prompts checked against llama.cpp");
  await base.dispose();
  await cand.dispose();
} catch (e) {
  check(false, e.stack);
}
finish();
