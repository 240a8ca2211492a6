// `pocketlm bench -o json` must read like llama-bench's JSON: an array of
// result objects with llama-bench's field names and types, so tooling written
// for llama-bench (compare scripts, dashboards) takes our results as they are.
// Timings are never asserted: only that they are there, positive and
// consistent with each other.
import path from "node:path";
import { SHARED, pocketlm, check, finish } from "./lib.mjs";

const model = path.join(SHARED, "models/stories260K.gguf");
const r = pocketlm(["bench", "-m", model, "-p", "16", "-n", "8", "-r", "2", "-o", "json", "--bandwidth", "10"]);
check(r.status === 0, `pocketlm bench exited ${r.status}: ${r.stderr}`);

let results = [];
try {
  results = JSON.parse(r.stdout);
  check(true, "the output parses as JSON");
} catch (e) {
  check(false, `the output is not JSON: ${e.message}\n${r.stdout}`);
}
check(Array.isArray(results) && results.length === 2, `want 2 results (pp16, tg8), got ${results.length}`);

// llama-bench's fields and their JSON types.
const fields = {
  build_commit: "string", build_number: "number", cpu_info: "string", gpu_info: "string", backends: "string",
  model_filename: "string", model_type: "string", model_size: "number", model_n_params: "number",
  n_batch: "number", n_ubatch: "number", n_threads: "number", cpu_mask: "string", cpu_strict: "boolean",
  poll: "number", type_k: "string", type_v: "string", n_gpu_layers: "number", split_mode: "string",
  main_gpu: "number", no_kv_offload: "boolean", flash_attn: "boolean", tensor_split: "string",
  use_mmap: "boolean", embeddings: "boolean", n_prompt: "number", n_gen: "number", n_depth: "number",
  test_time: "string", avg_ns: "number", stddev_ns: "number", avg_ts: "number", stddev_ts: "number",
  samples_ns: "object", samples_ts: "object",
};
const ints = ["build_number", "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "n_prompt",
              "n_gen", "n_depth", "avg_ns", "stddev_ns"];

for (const [i, res] of results.entries()) {
  const what = `result ${i}`;
  for (const [k, type] of Object.entries(fields))
    check(typeof res[k] === type, `${what}: ${k} is ${typeof res[k]}, want ${type}`);
  for (const k of ints) check(Number.isInteger(res[k]), `${what}: ${k} = ${res[k]} is not an integer`);
  check(res.model_filename === model, `${what}: model_filename ${res.model_filename}`);
  check(/^llama /.test(res.model_type), `${what}: model_type "${res.model_type}" should start with the arch`);
  check(res.model_size > 0 && res.model_n_params > 0, `${what}: model_size ${res.model_size} n_params ${res.model_n_params}`);
  check(res.n_threads >= 1 && res.n_batch >= 1, `${what}: n_threads ${res.n_threads}, n_batch ${res.n_batch}`);
  check(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(res.test_time), `${what}: test_time "${res.test_time}" not ISO 8601 UTC`);
  check(Array.isArray(res.samples_ns) && res.samples_ns.length === 2 && res.samples_ns.every((x) => Number.isInteger(x) && x > 0),
        `${what}: samples_ns ${JSON.stringify(res.samples_ns)}`);
  check(Array.isArray(res.samples_ts) && res.samples_ts.length === 2 && res.samples_ts.every((x) => x > 0),
        `${what}: samples_ts ${JSON.stringify(res.samples_ts)}`);
  // Internal consistency (not speed): t/s samples are tokens / seconds of the ns samples,
  // the averages are their means.
  const n = res.n_prompt + res.n_gen;
  const ts = res.samples_ns.map((ns) => (n * 1e9) / ns);
  check(ts.every((x, j) => Math.abs(x - res.samples_ts[j]) <= 1e-3 * x), `${what}: samples_ts disagree with samples_ns`);
  const mean = (a) => a.reduce((s, x) => s + x, 0) / a.length;
  check(Math.abs(mean(res.samples_ns) - res.avg_ns) <= 1, `${what}: avg_ns is not the mean of samples_ns`);
  check(Math.abs(mean(res.samples_ts) - res.avg_ts) <= 1e-3 * res.avg_ts, `${what}: avg_ts is not the mean of samples_ts`);
  check(res.stddev_ns >= 0 && res.stddev_ts >= 0, `${what}: negative stddev`);
  // Our additions.
  check(res.weight_bytes_per_token > 0 && res.bandwidth_gbps === 10 && res.bandwidth_share > 0,
        `${what}: bandwidth fields ${res.weight_bytes_per_token} ${res.bandwidth_gbps} ${res.bandwidth_share}`);
}
if (results.length === 2) {
  check(results[0].n_prompt === 16 && results[0].n_gen === 0, `first result is pp16: ${results[0].n_prompt}/${results[0].n_gen}`);
  check(results[1].n_prompt === 0 && results[1].n_gen === 8, `second result is tg8: ${results[1].n_prompt}/${results[1].n_gen}`);
}

// CSV: a header of field names, one quoted row per test.
const csv = pocketlm(["bench", "-m", model, "-p", "8", "-n", "4", "-r", "1", "-o", "csv", "--bandwidth", "10"]);
const lines = csv.stdout.trim().split("\n");
check(csv.status === 0 && lines.length === 3, `csv: ${csv.status}, ${lines.length} lines`);
const header = lines[0].split(",");
check(["model_filename", "n_threads", "n_prompt", "n_gen", "avg_ts", "stddev_ts"].every((f) => header.includes(f)),
      `csv header ${lines[0]}`);

// Markdown, and clean errors.
const md = pocketlm(["bench", "-m", model, "-p", "8", "-n", "4", "-r", "1", "--bandwidth", "10"]);
check(md.status === 0 && /\| pp8 \|/.test(md.stdout.replace(/ +/g, " ")) && /\| tg4 \|/.test(md.stdout.replace(/ +/g, " ")),
      `markdown table: ${md.stdout}`);
check(pocketlm(["bench", "-m", model, "-p", "x"]).status !== 0, "-p x accepted");
check(pocketlm(["bench", "-p", "8"]).status !== 0, "no model accepted");
check(pocketlm(["bench", "-m", "/nonexistent.gguf", "--bandwidth", "1"]).status !== 0, "missing model accepted");

finish();
