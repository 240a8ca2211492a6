// pocketlm serve's chat page (GET /) in headless Chromium (Debian `chromium`),
// driven through the DevTools protocol over a pipe (--remote-debugging-pipe:
// NUL-separated JSON on file descriptors 3 and 4, no npm browser driver).
// On a phone-sized viewport the test types a message as a user would, waits
// for the streamed answer and checks it against the answer the API gives the
// same greedy request (the official `openai` client, not streamed); then a
// second turn, whose request must carry the whole conversation.  It also
// checks that the page loads nothing but itself and the API, and streams in
// SSE.  PLM_SCREENSHOT=FILE saves a screenshot (docs/chat-page.png
// is made this way).  Every wait is bounded.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { SHARED, check, finish, startServer, killServers } from "./lib.mjs";

const MODEL = path.join(SHARED, "models/stories260K.gguf");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const N = 40;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "plm-chat-page-"));
let browser = null;

function cleanup() {
  killServers();
  if (browser && browser.exitCode === null && browser.signalCode === null) browser.kill("SIGKILL");
  try {
    fs.rmSync(tmp, { recursive: true, force: true, maxRetries: 3 });
  } catch (e) {
    console.error(`note: ${tmp} not removed (${e.code}): chromium was still writing its profile`);
  }
}
process.on("exit", cleanup);
const watchdog = setTimeout(() => { console.error("FAIL: the test ran past 120 s"); cleanup(); process.exit(1); }, 120000);
const show = (s) => JSON.stringify(s);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

if (spawnSync(CHROMIUM, ["--version"]).status !== 0) {
  console.error(`FAIL: no ${CHROMIUM} (apt-get install chromium; scripts/test.sh installs it)`);
  process.exit(1);
}

// ---- a DevTools protocol client over the pipe -----------------------------------

function launchChromium() {
  const args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-dev-shm-usage", "--remote-debugging-pipe",
                `--user-data-dir=${path.join(tmp, "profile")}`, "about:blank"];
  browser = spawn(CHROMIUM, args, { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
  browser.stderr.on("data", () => {});  // chromium is chatty on stderr; drained, not shown
  const toBrowser = browser.stdio[3], fromBrowser = browser.stdio[4];
  let nextId = 1, buf = "";
  const pending = new Map(), listeners = [];
  fromBrowser.on("data", (d) => {
    buf += d.toString("utf8");
    let end;
    while ((end = buf.indexOf("\0")) >= 0) {
      const msg = JSON.parse(buf.slice(0, end));
      buf = buf.slice(end + 1);
      if (msg.id && pending.has(msg.id)) {
        const { resolve, reject } = pending.get(msg.id);
        pending.delete(msg.id);
        if (msg.error) reject(new Error(`${msg.error.message} ${msg.error.data ?? ""}`));
        else resolve(msg.result);
      } else if (msg.method) {
        for (const l of listeners) l(msg);
      }
    }
  });
  const send = (method, params = {}, sessionId) => new Promise((resolve, reject) => {
    const id = nextId++;
    pending.set(id, { resolve, reject });
    toBrowser.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + "\0");
  });
  return { send, on: (fn) => listeners.push(fn) };
}

// ---- the run ------------------------------------------------------------------------

try {
  const srv = await startServer(["-m", MODEL, "-c", "1024", "-t", "1"]);
  const base = `http://127.0.0.1:${srv.port}`;
  const page = await fetch(`${base}/`);
  const html = await page.text();
  check(page.status === 200 && /^text\/html/.test(page.headers.get("content-type")) && html.includes("<textarea"),
        `GET / : ${page.status} ${page.headers.get("content-type")}`);
  check(!/\b(src|href)\s*=\s*["']?(https?:)?\/\//i.test(html) && !/@import|url\(/i.test(html),
        "the page references no external resource");

  const cdp = launchChromium();
  const requested = [];
  const exchanges = [], byId = new Map();
  cdp.on((m) => {
    if (m.method === "Network.requestWillBeSent") {
      requested.push(m.params.request.url);
      const x = { url: m.params.request.url, body: m.params.request.postData ?? "null", type: null };
      byId.set(m.params.requestId, x);
      exchanges.push(x);
    } else if (m.method === "Network.responseReceived" && byId.has(m.params.requestId)) {
      byId.get(m.params.requestId).type = (m.params.response.mimeType ?? "").split(";")[0];
    }
  });
  const { targetId } = await cdp.send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
  const tab = (method, params) => cdp.send(method, params, sessionId);
  await tab("Network.enable");
  await tab("Runtime.enable");
  // A phone: 390x844 CSS pixels at 3x, touch, mobile layout.
  await tab("Emulation.setDeviceMetricsOverride", { width: 390, height: 844, deviceScaleFactor: 2, mobile: true });
  await tab("Emulation.setTouchEmulationEnabled", { enabled: true });
  await tab("Page.enable");
  await tab("Page.navigate", { url: `${base}/` });

  const evaluate = async (expr) => {
    const r = await tab("Runtime.evaluate", { expression: expr, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`${expr}: ${r.exceptionDetails.exception?.description}`);
    return r.result.value;
  };
  const waitFor = async (expr, what, ms = 30000) => {
    for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(50)) if (await evaluate(expr)) return true;
    check(false, `timed out waiting for ${what}`);
    return false;
  };
  await waitFor("document.readyState === 'complete' && !!document.getElementById('input')", "the page to load");
  check(await evaluate("document.documentElement.scrollWidth <= window.innerWidth"),
        "the page fits a 390 px wide phone screen without horizontal scrolling");

  // Greedy and N tokens, set through the settings fields as a user would
  // (kept per origin: a server on another port starts from the defaults).
  const settings = (pairs) => evaluate(`(() => {
    for (const [id, v] of ${JSON.stringify(pairs)}) {
      const el = document.getElementById(id);
      el.value = v;
      el.dispatchEvent(new Event("change"));
    }
  })()`);
  await settings([["temperature", "0"], ["max_tokens", String(N)]]);

  // Types a message into the box and presses Enter; returns the answer bubble's
  // text and the number of streamed chunks once the page says it is done.
  const ask = async (text, turn) => {
    await evaluate("document.getElementById('input').focus()");
    await tab("Input.insertText", { text });
    for (const type of ["keyDown", "keyUp"])
      await tab("Input.dispatchKeyEvent", { type, key: "Enter", code: "Enter", windowsVirtualKeyCode: 13,
                                            ...(type === "keyDown" ? { text: "\r" } : {}) });
    const sel = `document.querySelectorAll('.msg.assistant')[${turn}]`;
    await waitFor(`!!${sel} && ${sel}.dataset.done === '1' && document.body.dataset.state === 'idle'`,
                  `answer ${turn}`);
    return evaluate(`(() => { const b = ${sel}; return { text: b.querySelector('span').textContent,
      chunks: Number(b.dataset.chunks || 0), errors: document.querySelectorAll('.msg.error').length,
      users: [...document.querySelectorAll('.msg.user')].map((u) => u.textContent) }; })()`);
  };

  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0, timeout: 30000 });
  const api = async (messages) => (await openai.chat.completions.create({
    model: "x", messages, max_tokens: N, temperature: 0 })).choices[0].message.content;

  const Q1 = "Tell me a story about a cat.";
  const a1 = await ask(Q1, 0);
  const ref1 = await api([{ role: "user", content: Q1 }]);
  check(a1.errors === 0 && a1.users[0] === Q1, `turn 1 on the page: ${show(a1)}`);
  check(ref1.length > 10 && a1.text === ref1, `turn 1: the page shows ${show(a1.text)}\n  the API answers ${show(ref1)}`);
  // Streamed: how many events carry the text depends on timing (the server
  // sends what was generated since its last write), so the test checks the
  // request and the response type instead, and prints the count.
  const chat = exchanges.filter((x) => x.url.endsWith("/v1/chat/completions"));
  check(chat.length >= 1 && chat.every((x) => JSON.parse(x.body).stream === true && x.type === "text/event-stream"),
        `the page asks for a stream and gets SSE: ${show(chat)}`);
  console.log(`turn 1 arrived in ${a1.chunks} SSE events`);

  const Q2 = "What happened next?";
  const a2 = await ask(Q2, 1);
  const ref2 = await api([{ role: "user", content: Q1 }, { role: "assistant", content: ref1 },
                          { role: "user", content: Q2 }]);
  check(a2.errors === 0 && a2.users[1] === Q2, `turn 2 on the page: ${show(a2)}`);
  check(ref2.length > 10 && a2.text === ref2, `turn 2: the page shows ${show(a2.text)}\n  the API answers ${show(ref2)}`);

  const foreign = requested.filter((u) => !u.startsWith(`${base}/`));
  check(requested.length >= 3 && foreign.length === 0, `requests beyond the server: ${show(foreign)}`);

  if (process.env.PLM_SCREENSHOT) {
    const shot = await tab("Page.captureScreenshot", { format: "png" });
    fs.writeFileSync(process.env.PLM_SCREENSHOT, Buffer.from(shot.data, "base64"));
    console.log(`screenshot: ${process.env.PLM_SCREENSHOT}`);
  }
  // With --api-key the page itself stays public; its API calls carry the key typed into its settings.
  const keyed = await startServer(["-m", MODEL, "-c", "1024", "-t", "1", "--api-key", "sesame"]);
  const kbase = `http://127.0.0.1:${keyed.port}`;
  check((await fetch(`${kbase}/`)).status === 200 && (await fetch(`${kbase}/v1/models`)).status === 401,
        "GET / is public, the API is not");
  await tab("Page.navigate", { url: `${kbase}/` });
  await waitFor("document.readyState === 'complete' && !!document.getElementById('api_key') && " +
                "document.querySelectorAll('.msg').length === 0", "the keyed page to load");
  await settings([["temperature", "0"], ["max_tokens", String(N)], ["api_key", "sesame"]]);
  const ak = await ask(Q1, 0);
  check(ak.errors === 0 && ak.text === ref1, `with the key: ${show(ak)}`);
  await settings([["api_key", "wrong"]]);
  await evaluate("document.getElementById('input').focus()");
  await tab("Input.insertText", { text: Q2 });
  await evaluate("document.getElementById('form').requestSubmit()");
  await waitFor("document.querySelectorAll('.msg.error').length === 1 && document.body.dataset.state === 'idle'",
                "the error of a wrong key");
  const errText = await evaluate("document.querySelector('.msg.error').textContent");
  check(/API key/.test(errText), `a wrong key is shown as the server's error: ${show(errText)}`);

  const exited = new Promise((resolve) => browser.once("exit", resolve));
  await cdp.send("Browser.close").catch(() => {});
  await Promise.race([exited, sleep(5000)]);
} catch (e) {
  check(false, e.stack);
}
clearTimeout(watchdog);
cleanup();
finish();
