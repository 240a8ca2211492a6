// stories260K greedy from "Once upon a time": pocketlm must produce the same
// 64 tokens as llama.cpp (node-llama-cpp 3.21.1, evaluated here and now),
// with flash attention off on both sides and on on both sides.
import path from "node:path";
import { SHARED, pocketlm, llama, check, finish } from "./lib.mjs";

const modelPath = path.join(SHARED, "models/stories260K.gguf");
const prompt = "Once upon a time";
const N = 64;

const l = await llama();
const model = await l.loadModel({ modelPath });
const input = [model.tokens.bos, ...model.tokenize(prompt)];

// llama.cpp's text with and without its flash attention; ours runs the
// matching mode (default: the exact two-pass softmax; -fa: one pass).
async function greedy(flashAttention) {
  const context = await model.createContext({ contextSize: 256, flashAttention, threads: 1 });
  const seq = context.getSequence();
  const out = [];
  for await (const t of seq.evaluate(input, { temperature: 0 })) {
    out.push(t);
    if (out.length === N) break;
  }
  await context.dispose();
  return model.detokenize(out);
}

for (const fa of [false, true]) {
  const wantText = await greedy(fa);
  for (const batch of ["512", "1"]) {
    const r = pocketlm(["run", "-m", modelPath, "-p", prompt, "-n", String(N), "--temp", "0",
                        "--no-display-prompt", "--ignore-eos", "-b", batch, ...(fa ? ["-fa"] : [])]);
    check(r.status === 0, `pocketlm run exited ${r.status}: ${r.stderr}`);
    const got = r.stdout.replace(/\n$/, "");
    check(got === wantText, `batch ${batch}${fa ? " -fa" : ""}: greedy text differs\n  llama.cpp: ` +
          `${JSON.stringify(wantText)}\n  pocketlm:  ${JSON.stringify(got)}`);
    check(/prompt \d+ tok.*generated 64 tok.*peak RSS/.test(r.stderr), `summary line missing: ${r.stderr}`);
  }
}

// Token ids too, not just text: tokenize our output the way llama.cpp does.
const ours = pocketlm(["tokenize", "-m", modelPath, prompt]);
check(ours.stdout.trim() === model.tokenize(prompt).join(" "), `prompt ids differ: ${ours.stdout.trim()}`);

await model.dispose();
finish();
