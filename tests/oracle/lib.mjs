// Shared helpers for the oracle tests: run the pocketlm binary, load llama.cpp.
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const SHARED = process.env.PLM_SHARED_DIR ?? path.join(here, "../../../shared");
export const BIN = process.env.POCKETLM_BIN ?? path.join(here, "../../build/pocketlm");

export function pocketlm(args, opts = {}) {
  const r = spawnSync(BIN, args, { encoding: "utf8", maxBuffer: 1 << 28, ...opts });
  if (r.error) throw r.error;
  return r;
}

let llamaPromise;
export async function llama() {
  const { getLlama } = await import("node-llama-cpp");
  llamaPromise ??= getLlama({ gpu: false, build: "never", logLevel: "error" });
  return llamaPromise;
}

// A tiny check harness that ends with the "N passed, N failed" line.
let passed = 0, failed = 0;
export function check(cond, msg) {
  if (cond) passed++;
  else {
    failed++;
    console.error("FAIL:", msg);
  }
}
export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed || !passed ? 1 : 0);
}

// `pocketlm serve` on a free loopback port it picks itself (--port 0, read
// from its log).  Every server started is remembered so that killServers()
// can end them whatever happened.
const servers = [];
export function startServer(args) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, ["serve", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
    servers.push(p);
    let log = "";
    const timer = setTimeout(() => reject(new Error(`server did not start: ${log}`)), 20000);
    p.stderr.on("data", (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({ proc: p, port: Number(m[1]), log: () => log });
      }
    });
    p.on("exit", (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${log}`)); });
  });
}
export function killServers() {
  for (const p of servers) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
}
