// pocketlm serve --parallel N: slots batched into one forward pass, and the
// prefix cache.  The oracle for every answer is the same request served
// alone: by a --parallel 1 server, one request at a time, and for one
// prompt by llama.cpp (node-llama-cpp, evaluated here).  Greedy answers of
// 4 (then 8, queued) concurrent clients on a --parallel 4 server must be
// byte-identical to those, and /metrics must show that their decode steps
// really shared forward passes.  A chat resent turn after turn must reuse
// the slot's cache: each turn evaluates only its new tokens (the server's
// per-request log line and usage.prompt_tokens_details say how many).
import path from "node:path";
import { SHARED, check, finish, startServer, killServers, STORY_PROMPTS as PROMPTS, completion, metric,
         llamaGreedyText } from "./lib.mjs";

const MODEL = path.join(SHARED, "models/stories260K.gguf");
const N = 40;

process.on("exit", killServers);
const watchdog = setTimeout(() => { console.error("FAIL: the test ran past 240 s"); killServers(); process.exit(1); },
                            240000);

// --batch-invariant: a token's result does not depend on how its prompt was
// split (by the prefix cache) or on what shared its forward pass, so the
// answers must match to the byte (without it a batched sum's last bits can
// flip a greedy near-tie; stories260K rarely has one, a random model often).
const serve = (parallel) => startServer(["-m", MODEL, "-c", "512", "-t", "1", "--parallel", String(parallel),
                                         "--queue", "16", "--batch-invariant"]);

const complete = async (port, prompt, { stream = false, n = N, ignore_eos = false } = {}) =>
  (await completion(port, { prompt, max_tokens: n, ignore_eos }, stream)).choices[0].text;

async function chat(port, messages) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages, max_tokens: 24, temperature: 0 }),
  });
  return r.json();
}

const llamaGreedy = (prompt) => llamaGreedyText(MODEL, prompt, N, { stopAtEos: true });

try {
  // ---- the answers served alone --------------------------------------------------
  const one = await serve(1);
  const alone = [];
  for (const p of PROMPTS) alone.push(await complete(one.port, p));
  check(alone.every((t) => t.length > 20), `answers alone: ${JSON.stringify(alone)}`);
  const LONG = { n: 300, ignore_eos: true };  // long enough that 4 clients surely overlap
  const aloneLong = [];
  for (const p of PROMPTS.slice(0, 4)) aloneLong.push(await complete(one.port, p, LONG));
  const llamaText = await llamaGreedy(PROMPTS[0]);
  check(alone[0] === llamaText, `served alone vs llama.cpp:\n  llama.cpp: ${JSON.stringify(llamaText)}\n` +
        `  pocketlm:  ${JSON.stringify(alone[0])}`);

  // ---- 4 concurrent clients on 4 slots, then 8 (half of them queued) ------------
  const four = await serve(4);
  const got4 = await Promise.all(PROMPTS.slice(0, 4).map((p) => complete(four.port, p)));
  for (let i = 0; i < 4; i++)
    check(got4[i] === alone[i], `4 concurrent, prompt ${i}:\n  alone: ${JSON.stringify(alone[i])}\n` +
          `  --parallel 4: ${JSON.stringify(got4[i])}`);
  const steps0 = await metric(four.port, "decode_steps_total");
  const stepTokens0 = await metric(four.port, "decode_step_tokens_total");
  const got4long = await Promise.all(PROMPTS.slice(0, 4).map((p) => complete(four.port, p, LONG)));
  for (let i = 0; i < 4; i++)
    check(got4long[i] === aloneLong[i], `4 concurrent, 300 tokens, prompt ${i}: differs from alone`);
  const steps = await metric(four.port, "decode_steps_total") - steps0;
  const stepTokens = await metric(four.port, "decode_step_tokens_total") - stepTokens0;
  // 4 x 300 tokens went through the steps; batched, far fewer passes than tokens.
  check(steps > 0 && stepTokens / steps > 2, `slots batched: ${stepTokens} tokens in ${steps} passes`);
  console.log(`4 clients x 300 tokens: ${stepTokens} tokens in ${steps} forward passes`);

  const got8 = await Promise.all(PROMPTS.map((p, i) => complete(four.port, p, { stream: i % 2 === 1 })));
  for (let i = 0; i < 8; i++)
    check(got8[i] === alone[i], `8 concurrent (4 queued), prompt ${i}${i % 2 ? " (streamed)" : ""}:\n` +
          `  alone: ${JSON.stringify(alone[i])}\n  --parallel 4: ${JSON.stringify(got8[i])}`);

  // ---- prefix reuse: three conversations, four turns each, at the same time -----
  const QUESTIONS = [["Tell me a story.", "What did the cat do?", "And then?", "How did it end?"],
                     ["Who is Lily?", "Where did she go?", "Why?", "Was she happy?"],
                     ["Say hello.", "Say it again.", "Once more.", "Thank you."]];
  const evaluatedPerTurn = [];
  await Promise.all(QUESTIONS.map(async (qs, c) => {
    const messages = [{ role: "system", content: "You are a storyteller." }];
    let prevPrompt = 0;
    for (let k = 0; k < qs.length; k++) {
      messages.push({ role: "user", content: qs[k] });
      const r = await chat(four.port, messages);
      const u = r.usage, cached = u?.prompt_tokens_details?.cached_tokens;
      const evaluated = u.prompt_tokens - cached;
      evaluatedPerTurn.push({ c, k, prompt: u.prompt_tokens, cached, evaluated });
      if (k > 0) {
        // Everything the previous turn's prompt held is reused; what is
        // evaluated is the new text (the answer as the template writes it,
        // the question, the template's markers), never the turns before.
        check(cached >= prevPrompt, `conversation ${c} turn ${k + 1}: ${cached} cached < previous prompt ${prevPrompt}`);
        check(evaluated < u.prompt_tokens - prevPrompt + 2,
              `conversation ${c} turn ${k + 1}: ${evaluated} evaluated of ${u.prompt_tokens}`);
      }
      prevPrompt = u.prompt_tokens;
      messages.push({ role: "assistant", content: r.choices[0].message.content });
    }
    // The last turn served alone on the other server (no cache of this
    // conversation there) gives the same answer.
    const last = messages.pop();
    const fresh = await chat(one.port, messages);
    check(fresh.choices[0].message.content === last.content,
          `conversation ${c}: with reuse ${JSON.stringify(last.content)} vs alone ` +
          `${JSON.stringify(fresh.choices[0].message.content)}`);
  }));
  // The server's log line for each request says the same.
  const lines = [...four.log().matchAll(/slot (\d+): prompt (\d+) tokens, (\d+) cached, (\d+) evaluated/g)];
  for (const t of evaluatedPerTurn)
    check(lines.some((m) => Number(m[2]) === t.prompt && Number(m[3]) === t.cached && Number(m[4]) === t.evaluated),
          `log line for ${JSON.stringify(t)}`);
  console.log("turns (conversation, turn, prompt, cached, evaluated):",
              evaluatedPerTurn.map((t) => `${t.c}/${t.k + 1}:${t.prompt}/${t.cached}/${t.evaluated}`).join(" "));

  // ---- a client that leaves frees its slot -----------------------------------------
  const cancelled0 = await metric(four.port, 'jobs_total\\{outcome="cancelled"\\}');
  const ctrls = Array.from({ length: 4 }, () => new AbortController());
  const pending = ctrls.map((a, i) => fetch(`http://127.0.0.1:${four.port}/v1/completions`, {
    method: "POST", signal: a.signal, headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: PROMPTS[i], max_tokens: 400, temperature: 0, ignore_eos: true, stream: true }),
  }).then((r) => r.body.getReader().read()).catch(() => null));
  await Promise.all(pending);  // each has its first chunk: all four slots busy
  for (const a of ctrls) a.abort();
  let busy = 4;
  for (let i = 0; i < 100 && busy > 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
    busy = await metric(four.port, "slots_busy");
  }
  check(busy === 0, `slots freed after the clients left: ${busy} busy`);
  check(await metric(four.port, 'jobs_total\\{outcome="cancelled"\\}') - cancelled0 === 4, "4 generations cancelled");
  const after = await complete(four.port, PROMPTS[2]);
  check(after === alone[2], "served after the cancellations");
} catch (e) {
  check(false, e.stack);
} finally {
  clearTimeout(watchdog);
  killServers();
}
finish();
