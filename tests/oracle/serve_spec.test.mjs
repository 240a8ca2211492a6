// pocketlm serve with speculative decoding in every slot (--draft-model,
// --lookup, --lookup-cache).  The oracle for every greedy answer is the same
// request served alone by a server WITHOUT speculation (one request at a
// time), and for one prompt llama.cpp (node-llama-cpp).  With speculation
// on, the answers of 8 concurrent clients on a --parallel 4 server (each
// round verifying the drafts of all busy slots in one forward pass) must be
// byte-identical to those, and /metrics must show that drafts were made and
// accepted: stories260K as its own draft agrees with itself on every token,
// and prompt lookup finds the repeats of a story that quotes itself.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { SHARED, BIN, check, finish, startServer, killServers, STORY_PROMPTS as PROMPTS, completion, metric,
         llamaGreedyText } from "./lib.mjs";

const MODEL = path.join(SHARED, "models/stories260K.gguf");
const N = 48;
const tmp = mkdtempSync(path.join(os.tmpdir(), "plm-serve-spec-"));

process.on("exit", () => { killServers(); rmSync(tmp, { recursive: true, force: true }); });
const watchdog = setTimeout(() => { console.error("FAIL: the test ran past 240 s"); killServers(); process.exit(1); },
                            240000);

// --batch-invariant where prompts are split or batched differently from the
// lone request (see serve_slots.test.mjs); the serial comparison below runs
// without it, where speculation's own exactness rule is what holds.
const serve = (parallel, extra = [], invariant = true) =>
  startServer(["-m", MODEL, "-c", "512", "-t", "1", "--parallel", String(parallel), "--queue", "16",
               ...(invariant ? ["--batch-invariant"] : []), ...extra]);

const complete = (port, prompt, { stream = false, n = N, extra = {} } = {}) =>
  completion(port, { prompt, max_tokens: n, ignore_eos: true, ...extra }, stream);
const text = async (port, prompt, opts) => (await complete(port, prompt, opts)).choices[0].text;

async function metrics(port) {
  const [drafted, accepted, verifications, generated] = await Promise.all(
    ["spec_drafted_tokens_total", "spec_accepted_tokens_total", "spec_verifications_total",
     "generated_tokens_total"].map((name) => metric(port, name)));
  return { drafted, accepted, verifications, generated };
}

// llama.cpp's greedy continuation (ignoring end of text, as the requests do).
const llamaGreedy = (prompt) => llamaGreedyText(MODEL, prompt, N);

// 8 clients at once (4 queued) on a --parallel 4 server: every answer must be
// the one served alone; returns the /metrics difference.
async function concurrent(srv, alone, what) {
  const m0 = await metrics(srv.port);
  const got = await Promise.all(PROMPTS.map((p, i) => text(srv.port, p, { stream: i % 2 === 1 })));
  for (let i = 0; i < PROMPTS.length; i++)
    check(got[i] === alone[i], `${what}, 8 concurrent clients, prompt ${i}${i % 2 ? " (streamed)" : ""}:\n` +
          `  alone, no speculation: ${JSON.stringify(alone[i])}\n  speculating: ${JSON.stringify(got[i])}`);
  const m1 = await metrics(srv.port);
  const d = { drafted: m1.drafted - m0.drafted, accepted: m1.accepted - m0.accepted,
              verifications: m1.verifications - m0.verifications, generated: m1.generated - m0.generated };
  console.log(`${what}: ${d.generated} tokens generated, ${d.drafted} drafted, ${d.accepted} accepted in ` +
              `${d.verifications} verifications`);
  return d;
}

try {
  // ---- the oracle: served alone without speculation, and llama.cpp ----------------
  const plain = await serve(1);
  const alone = [];
  for (const p of PROMPTS) alone.push(await text(plain.port, p));
  check(alone.every((t) => t.length > 40), `answers alone: ${JSON.stringify(alone)}`);
  const llamaText = await llamaGreedy(PROMPTS[0]);
  check(alone[0] === llamaText, `served alone vs llama.cpp:\n  llama.cpp: ${JSON.stringify(llamaText)}\n` +
        `  pocketlm:  ${JSON.stringify(alone[0])}`);

  // ---- a draft model (the model itself: it agrees on every token) -------------------
  // --draft-fixed: a draft as costly as the model never pays, and the adaptive
  // control would soon pause it; here every step must draft.
  const draft = await serve(4, ["--draft-model", MODEL, "--draft-max", "8", "--draft-p-min", "0", "--draft-fixed"]);
  const dd = await concurrent(draft, alone, "--draft-model");
  check(dd.drafted > 0 && dd.accepted >= 0.95 * dd.drafted,
        `the model as its own draft: ${dd.accepted} of ${dd.drafted} drafted tokens accepted (want all but a near-tie or two)`);
  // Every verification yields its accepted drafts + 1: far fewer than one pass per token.
  check(dd.verifications > 0 && dd.accepted + dd.verifications > dd.generated / 2,
        `most tokens came from verifications: ${dd.accepted} accepted in ${dd.verifications} of ${dd.generated}`);
  // A request asking for logprobs runs plain (its records need each token's
  // own logits), with the same answer and its log-probabilities.
  const lp = await complete(draft.port, PROMPTS[1], { extra: { logprobs: 2 } });
  check(lp.choices[0].text === alone[1], `logprobs request with speculation: ${JSON.stringify(lp.choices[0].text)}`);
  check(lp.choices[0].logprobs?.token_logprobs?.length === N &&
        lp.choices[0].logprobs.token_logprobs.every((x) => Number.isFinite(x) && x <= 0),
        `logprobs with speculation on: ${JSON.stringify(lp.choices[0].logprobs)?.slice(0, 200)}`);
  // Sampling: the acceptance rule runs (test_spec_sampling holds it to the
  // plain distribution); here the answers must be whole.
  const sampled = await Promise.all(PROMPTS.slice(0, 4).map((p, i) =>
    complete(draft.port, p, { extra: { temperature: 0.8, seed: 7 + i } })));
  check(sampled.every((r) => r.usage?.completion_tokens === N), `sampled answers with a draft: ` +
        JSON.stringify(sampled.map((r) => r.usage)));

  // ---- the adaptive control in shared passes: slots start and stop drafting as
  // the number of sequences in a pass changes (8 clients on 4 slots: 4, then
  // fewer as answers end), and requests start and end mid-draft.  Whatever it
  // chose, every answer is the one served alone.
  const adaptive = await serve(4, ["--draft-model", MODEL, "--draft-max", "8", "--draft-p-min", "0"]);
  const ad = await concurrent(adaptive, alone, "--draft-model, adaptive");
  check(ad.generated === PROMPTS.length * N, `adaptive: ${ad.generated} tokens generated, want ${PROMPTS.length * N}`);
  const ad2 = await concurrent(adaptive, alone, "--draft-model, adaptive, second wave");
  check(ad2.accepted <= ad2.drafted, `adaptive, second wave: ${ad2.accepted} of ${ad2.drafted} accepted`);

  // ---- prompt lookup, and the n-gram cache shared by the slots ------------------
  const cacheFile = path.join(tmp, "serve.ngram");
  const lookup = await serve(4, ["--lookup", "3", "--lookup-cache", cacheFile, "--draft-max", "6"]);
  const ld = await concurrent(lookup, alone, "--lookup 3 --lookup-cache");
  check(ld.drafted > 0 && ld.accepted > 0, `lookup drafted ${ld.drafted}, accepted ${ld.accepted}`);
  // SIGTERM: the server saves the cache the slots learned; a new server loads it.
  lookup.proc.kill("SIGTERM");
  await new Promise((r) => lookup.proc.on("exit", r));
  check(existsSync(cacheFile) && statSync(cacheFile).size > 16, "the n-gram cache was saved at exit");
  const again = await serve(2, ["--lookup-cache", cacheFile]);
  const cd = await (async () => {
    const m0 = await metrics(again.port);
    const t = await text(again.port, PROMPTS[0]);
    check(t === alone[0], `--lookup-cache alone: ${JSON.stringify(t)}`);
    const m1 = await metrics(again.port);
    return { drafted: m1.drafted - m0.drafted, accepted: m1.accepted - m0.accepted };
  })();
  // The cache learned this very answer before: its proposals land.
  check(cd.accepted > 0, `the saved cache proposes what it learned: ${cd.accepted} of ${cd.drafted} accepted`);

  // ---- without --batch-invariant: a greedy verification's rows are computed
  // with the single-token kernel, so an answer served alone is plain decoding's.
  const plainNi = await serve(1, [], false);
  const specNi = await serve(2, ["--draft-model", MODEL, "--draft-p-min", "0"], false);
  for (const p of PROMPTS.slice(0, 4)) {
    const want = await text(plainNi.port, p), got = await text(specNi.port, p);
    check(got === want, `no --batch-invariant, served alone, ${JSON.stringify(p)}:\n  plain: ${JSON.stringify(want)}\n` +
          `  speculating: ${JSON.stringify(got)}`);
  }
  check((await metrics(specNi.port)).accepted > 0, "drafts accepted without --batch-invariant");

  // ---- the memory fit counts the draft's cache of every slot ---------------------
  // `plan` bills 8.9 MB for 8 slots without a draft and 14.5 MB with one (its
  // 8 sequences' KV cache, 8 x 17 logit rows): 12M fits the first only.
  const fit = (extra) => spawnSync(BIN, ["serve", "--port", "0", "-m", MODEL, "-c", "512", "--parallel", "8",
                                         "--mem-limit", "12M", "--grace", "0", ...extra],
                                   { encoding: "utf8", timeout: 20000 });
  const refused = fit(["--draft-model", MODEL]);
  check(refused.status === 1 && /model and draft need [\d.]+ MB .* budget is 12\.00 MB/.test(refused.stderr),
        `--parallel 8 with a draft over --mem-limit 12M refused: ${refused.status} ${refused.stderr}`);
  const plan = spawnSync(BIN, ["plan", "-m", MODEL, "-c", "512", "--parallel", "8", "--draft-model", MODEL],
                         { encoding: "utf8" });
  check(/draft model, \d+ layers \(\+ 136 logit rows\)/.test(plan.stdout), `plan --parallel 8 --draft-model: ${plan.stdout}`);
} catch (e) {
  check(false, e.stack);
} finally {
  clearTimeout(watchdog);
  killServers();
}
finish();
