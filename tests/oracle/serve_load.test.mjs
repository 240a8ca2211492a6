// The load test (bench/serve-load.mjs), small enough for CI: 4 concurrent
// clients, 16 streamed greedy requests on a --parallel 4 server with
// stories260K.  The script itself checks every answer against the same
// prompt served alone and fails on any error but a documented 503; here we
// also check that its report is whole and that the slots were batched.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SHARED, check, finish } from "./lib.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const r = spawnSync("node", [path.join(here, "../../bench/serve-load.mjs"), "-m", path.join(SHARED, "models/stories260K.gguf"),
                             "--parallel", "4", "--levels", "1,4", "--requests", "16", "--max-tokens", "64", "-t", "1", "--json", "--batch-invariant",
                             "--timeout", "120"],
                    { encoding: "utf8", env: { ...process.env, POCKETLM_BIN: process.env.POCKETLM_BIN } });
check(r.status === 0, `serve-load exited ${r.status}: ${r.stdout}${r.stderr}`);
let res = null;
try { res = JSON.parse(r.stdout); } catch { check(false, `report: ${r.stdout}`); }
if (res) {
  check(res.problems.length === 0, `problems: ${res.problems.join("; ")}`);
  check(res.levels.length === 2 && res.levels.every((l) => l.tokens === l.requests * res.maxTokens),
        `every answer whole: ${JSON.stringify(res.levels)}`);
  check(res.levels[1].batch > 1.3, `4 clients share decode passes: ${res.levels[1].batch} tokens per pass`);
  console.log(JSON.stringify(res.levels.map((l) => ({ clients: l.clients, tokPerS: l.tokPerS, batch: l.batch }))));
}
finish();
