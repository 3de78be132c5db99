// The scripted model server over plain fetch: SSE and JSON replies, errors, stream errors, hangs,
// errors answered for a time window, match routing, the default reply, side requests, recording,
// script validation, the command.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import {
  InvalidScriptError,
  hermeticEnv,
  parseScript,
  pinnedClaudeBin,
  startModelServer,
  type ModelServer,
} from "../../src/testing/index.ts";

interface Sse {
  event: string;
  data: Record<string, any>;
}

function parseSse(text: string): Sse[] {
  return text
    .split("\n\n")
    .filter((chunk) => chunk.trim() !== "")
    .map((chunk) => {
      const event = /^event: (.*)$/m.exec(chunk)?.[1] ?? "";
      const data = JSON.parse(/^data: (.*)$/m.exec(chunk)?.[1] ?? "null") as Record<string, any>;
      return { event, data };
    });
}

function post(
  server: ModelServer,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(`${server.url}/v1/messages?beta=true`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: signal ?? null,
  });
}

const ask = (text: string, extra: Record<string, unknown> = {}) => ({
  model: "claude-test",
  stream: true,
  tools: [{ name: "Bash" }],
  messages: [{ role: "user", content: [{ type: "text", text }] }],
  ...extra,
});

async function serve(
  context: { after(fn: () => unknown): void },
  script: unknown,
  opts: Record<string, unknown> = {},
): Promise<ModelServer> {
  const server = await startModelServer({ script, ...opts });
  context.after(() => server.close());
  return server;
}

/** Rebuilds the content blocks from the deltas, as a client would. */
function assemble(events: Sse[]): Array<Record<string, any>> {
  const blocks: Array<Record<string, any>> = [];
  for (const { event, data } of events) {
    if (event === "content_block_start") blocks[data["index"]] = { ...data["content_block"], json: "" };
    if (event === "content_block_delta") {
      const block = blocks[data["index"]]!;
      const delta = data["delta"];
      if (delta.type === "text_delta") block["text"] += delta.text;
      if (delta.type === "thinking_delta") block["thinking"] += delta.thinking;
      if (delta.type === "signature_delta") block["signature"] += delta.signature;
      if (delta.type === "input_json_delta") block["json"] += delta.partial_json;
    }
  }
  return blocks;
}

test("streams text, thinking, redacted thinking and tool_use as Anthropic SSE", async (context) => {
  const longText = "a fairly long answer that is split into several text deltas by the server";
  const server = await serve(context, {
    responses: [
      {
        content: [
          { type: "thinking", thinking: "let me think about this for a while, step by step" },
          { type: "redacted_thinking" },
          { type: "text", text: longText },
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "ls -la /some/rather/long/path/to/list", description: "list" },
          },
        ],
        usage: { input_tokens: 100, output_tokens: 42 },
      },
    ],
  });
  const res = await post(server, ask("hi"));
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
  const events = parseSse(await res.text());
  const names = events.map((e) => e.event);
  assert.equal(names[0], "message_start");
  assert.deepEqual(names.slice(-2), ["message_delta", "message_stop"]);
  for (const event of events) assert.equal(event.data["type"], event.event, "data.type repeats the event name");
  assert.equal(events[0]!.data["message"]["model"], "claude-test");
  assert.match(events[0]!.data["message"]["id"], /^msg_/);
  assert.equal(names.filter((n) => n === "content_block_start").length, 4);
  assert.equal(names.filter((n) => n === "content_block_stop").length, 4);
  assert.ok(
    events.filter((e) => e.data["delta"]?.["type"] === "text_delta").length > 1,
    "text arrives in several deltas",
  );
  const [thinking, redacted, text, tool] = assemble(events);
  assert.equal(thinking!["thinking"], "let me think about this for a while, step by step");
  assert.ok(thinking!["signature"].length > 0);
  assert.equal(redacted!["type"], "redacted_thinking");
  assert.ok(typeof redacted!["data"] === "string" && redacted!["data"].length > 0);
  assert.equal(text!["text"], longText);
  assert.equal(tool!["name"], "Bash");
  assert.match(tool!["id"], /^toolu_/);
  assert.deepEqual(JSON.parse(tool!["json"]), {
    command: "ls -la /some/rather/long/path/to/list",
    description: "list",
  });
  const delta = events.at(-2)!.data;
  assert.equal(delta["delta"]["stop_reason"], "tool_use");
  assert.equal(delta["usage"]["output_tokens"], 42);
  assert.equal(events[0]!.data["message"]["usage"]["input_tokens"], 100);
});

test("tool ids are fresh per block; stop reason end_turn without tools, or as scripted", async (context) => {
  const call = { type: "tool_use", name: "Read", input: { file_path: "/x" } };
  const server = await serve(context, {
    responses: [
      { content: [call, call] },
      { content: [{ type: "text", text: "x" }] },
      { content: [{ type: "text", text: "y" }], stopReason: "max_tokens" },
    ],
  });
  const first = assemble(parseSse(await (await post(server, ask("a"))).text()));
  assert.notEqual(first[0]!["id"], first[1]!["id"]);
  const stop = async () =>
    parseSse(await (await post(server, ask("b"))).text()).find((e) => e.event === "message_delta")!.data["delta"][
      "stop_reason"
    ];
  assert.equal(await stop(), "end_turn");
  assert.equal(await stop(), "max_tokens");
});

test("answers one JSON message when stream is false", async (context) => {
  const server = await serve(context, {
    responses: [
      {
        content: [
          { type: "text", text: "plain" },
          { type: "tool_use", name: "Bash", input: { command: "true" } },
        ],
      },
    ],
  });
  const res = await post(server, ask("hi", { stream: false }));
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /application\/json/);
  const body = (await res.json()) as Record<string, any>;
  assert.equal(body["type"], "message");
  assert.equal(body["role"], "assistant");
  assert.equal(body["stop_reason"], "tool_use");
  assert.deepEqual(body["content"][0], { type: "text", text: "plain" });
  assert.deepEqual(body["content"][1]["input"], { command: "true" });
  assert.match(body["content"][1]["id"], /^toolu_/);
  assert.equal(typeof body["usage"]["input_tokens"], "number");
});

test("a scripted error is an HTTP status with an Anthropic error body and its headers", async (context) => {
  const server = await serve(context, {
    responses: [
      {
        error: {
          status: 429,
          type: "rate_limit_error",
          message: "too many (scripted)",
          headers: { "retry-after": "1" },
        },
      },
    ],
  });
  const res = await post(server, ask("hi"));
  assert.equal(res.status, 429);
  assert.equal(res.headers.get("retry-after"), "1");
  assert.deepEqual(await res.json(), {
    type: "error",
    error: { type: "rate_limit_error", message: "too many (scripted)" },
  });
});

test("an error with forMs answers every request for that long after its first, then the next response does", async (context) => {
  const server = await serve(context, {
    responses: [
      { error: { status: 429, type: "rate_limit_error", message: "limited (scripted)" }, forMs: 300 },
      { content: [{ type: "text", text: "after the window" }] },
    ],
  });
  const statuses: number[] = [];
  const started = performance.now();
  let res: Response;
  do {
    res = await post(server, ask("hi", { stream: false }));
    statuses.push(res.status);
  } while (res.status === 429 && performance.now() - started < 5000);
  const elapsed = performance.now() - started;
  assert.ok(statuses.length > 2, `several requests in the window: ${statuses.join(",")}`);
  assert.deepEqual(new Set(statuses.slice(0, -1)), new Set([429]));
  assert.equal(res.status, 200);
  assert.ok(elapsed >= 300 && elapsed < 2000, `the window closed after ${elapsed} ms`);
  assert.equal(((await res.json()) as { content: Array<{ text: string }> }).content[0]!.text, "after the window");
  assert.deepEqual(
    server.requests().map((r) => r.responseIndex),
    [...statuses.slice(0, -1).map(() => 0), 1],
  );
});

test("a stream error arrives as SSE event: error after the given number of blocks", async (context) => {
  const server = await serve(context, {
    responses: [
      {
        streamError: { type: "overloaded_error", message: "Overloaded" },
        afterBlocks: 1,
        content: [
          { type: "text", text: "first" },
          { type: "text", text: "never" },
        ],
      },
      { streamError: { type: "api_error", message: "boom" } },
    ],
  });
  const events = parseSse(await (await post(server, ask("a"))).text());
  assert.deepEqual(
    events.map((e) => e.event),
    ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "error"],
  );
  assert.deepEqual(events.at(-1)!.data, { type: "error", error: { type: "overloaded_error", message: "Overloaded" } });
  const bare = parseSse(await (await post(server, ask("b"))).text());
  assert.deepEqual(
    bare.map((e) => e.event),
    ["message_start", "error"],
  );
});

test("a hang sends headers then nothing until the client goes away", async (context) => {
  const server = await serve(context, { responses: [{ hang: true }] });
  const controller = new AbortController();
  const res = await post(server, ask("hi"), {}, controller.signal);
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const read = reader.read();
  // Whatever arrives must not be data: the read only settles because we abort.
  const raced = await Promise.race([read.then(() => "data"), new Promise((r) => setImmediate(() => r("pending")))]);
  assert.equal(raced, "pending");
  controller.abort();
  await assert.rejects(read);
  // The server is still healthy afterwards and the hang was consumed.
  const next = parseSse(await (await post(server, ask("again"))).text());
  assert.equal(assemble(next)[0]!["text"], "done");
});

test("chunkDelayMs paces the events; delayMs delays the first byte", async (context) => {
  const server = await serve(context, {
    responses: [{ content: [{ type: "text", text: "slow" }], chunkDelayMs: 30, delayMs: 50 }],
  });
  const started = performance.now();
  const res = await post(server, ask("hi"));
  const headersAt = performance.now() - started;
  const reader = res.body!.getReader();
  let chunks = 0;
  for (;;) {
    const { done } = await reader.read();
    if (done) break;
    chunks++;
  }
  const total = performance.now() - started;
  assert.ok(headersAt >= 45, `headers after ${headersAt} ms`);
  assert.ok(chunks >= 3, `events arrived in ${chunks} chunks`);
  assert.ok(total >= 50 + 5 * 30 - 10, `stream took ${total} ms`);
});

test("match routes a response to the request whose last user message contains it; others keep their order", async (context) => {
  const server = await serve(context, {
    responses: [
      { match: "SUBAGENT", content: [{ type: "text", text: "for the subagent" }] },
      { content: [{ type: "text", text: "main 1" }] },
      { content: [{ type: "text", text: "main 2" }] },
    ],
  });
  const text = async (prompt: string) => assemble(parseSse(await (await post(server, ask(prompt))).text()))[0]!["text"];
  assert.equal(await text("main question"), "main 1");
  assert.equal(await text("you are a SUBAGENT, do x"), "for the subagent");
  assert.equal(await text("a SUBAGENT again"), "main 2", "a consumed match no longer applies");
  assert.equal(server.remaining(), 0);
  assert.equal(await text("anything"), "done", "an exhausted script answers done");
  assert.deepEqual(
    server.requests().map((r) => r.responseIndex),
    [1, 0, 2, null],
  );
});

test("match sees tool_result text in the last user message", async (context) => {
  const server = await serve(context, {
    responses: [{ match: "exit code 7", content: [{ type: "text", text: "saw it" }] }],
  });
  const body = ask("", {
    messages: [
      { role: "user", content: "run it" },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "Bash", input: {} }] },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "failed: exit code 7" }] },
        ],
      },
    ],
  });
  assert.equal(assemble(parseSse(await (await post(server, body)).text()))[0]!["text"], "saw it");
});

test("side requests (no tools, small model) are answered without consuming the script", async (context) => {
  const server = await serve(context, { responses: [{ content: [{ type: "text", text: "the real answer" }] }] });
  const side = await post(server, {
    model: "claude-haiku-4-5",
    stream: false,
    messages: [{ role: "user", content: "title this" }],
  });
  assert.equal(((await side.json()) as any).content[0].text, "Scripted session");
  assert.equal(server.remaining(), 1);
  assert.equal(assemble(parseSse(await (await post(server, ask("q"))).text()))[0]!["text"], "the real answer");
  assert.deepEqual(
    server.requests().map((r) => r.kind),
    ["side", "messages"],
  );

  const strict = await serve(
    context,
    { responses: [{ content: [{ type: "text", text: "scripted" }] }] },
    { sideRequest: false },
  );
  const res = await post(strict, {
    model: "claude-haiku-4-5",
    stream: false,
    messages: [{ role: "user", content: "title this" }],
  });
  assert.equal(((await res.json()) as any).content[0].text, "scripted");
});

test("every request is recorded, readable over GET /_requests, without credentials", async (context) => {
  const server = await serve(context, { responses: [] });
  const secret = "sk-ant-api03-should-never-be-recorded";
  await (
    await post(server, ask("hello", { system: [{ type: "text", text: "sys" }] }), {
      "x-api-key": secret,
      authorization: `Bearer ${secret}`,
      "anthropic-version": "2023-06-01",
    })
  ).text();
  await (
    await fetch(`${server.url}/v1/messages/count_tokens`, {
      method: "POST",
      body: JSON.stringify({ messages: [{ role: "user", content: "abc" }] }),
    })
  ).json();
  const unknown = await fetch(`${server.url}/v1/models`);
  assert.equal(unknown.status, 404);
  assert.equal(((await unknown.json()) as any).type, "error");
  const gz = await fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "content-encoding": "gzip" },
    body: gzipSync(JSON.stringify(ask("compressed body", { stream: false }))),
  });
  assert.equal(gz.status, 200);
  await gz.text();
  const bad = await fetch(`${server.url}/v1/messages`, { method: "POST", body: "not json" });
  assert.equal(bad.status, 400);
  await bad.text();

  const over = (await (await fetch(`${server.url}/_requests`)).json()) as Array<Record<string, any>>;
  assert.deepEqual(over, JSON.parse(JSON.stringify(server.requests())));
  assert.deepEqual(
    over.map((r) => r["kind"]),
    ["messages", "count_tokens", "other", "messages", "messages"],
  );
  const first = over[0]!;
  assert.equal(first["model"], "claude-test");
  assert.equal(first["path"], "/v1/messages?beta=true");
  assert.deepEqual(first["tools"], ["Bash"]);
  assert.deepEqual(first["system"], [{ type: "text", text: "sys" }]);
  assert.equal(first["headers"]["anthropic-version"], "2023-06-01");
  assert.ok(!Number.isNaN(Date.parse(first["at"])));
  assert.equal(over[3]!["lastUserText"], "compressed body");
  assert.equal(over[2]!["path"], "/v1/models");
  const all = JSON.stringify(over);
  assert.ok(!all.includes(secret));
  assert.ok(!all.toLowerCase().includes("x-api-key") && !all.toLowerCase().includes("authorization"));
});

test("a bad script is rejected with the field path named", async () => {
  assert.throws(
    () =>
      parseScript({
        responses: [{ content: [{ type: "text", text: "ok" }] }, { error: { status: 200, type: "x", message: "m" } }],
      }),
    (err: unknown) =>
      err instanceof InvalidScriptError &&
      err.issues.some((i) => i.startsWith("responses.1.error.status:")) &&
      /responses\.1\.error\.status/.test(err.message),
  );
  assert.throws(
    () => parseScript({ responses: [{ content: [{ type: "tool_use", name: "Bash" }] }] }),
    (err: unknown) => err instanceof InvalidScriptError && /responses\.0\.content\.0\.input/.test(err.message),
  );
  assert.throws(() => parseScript({ replies: [] }), InvalidScriptError);
  await assert.rejects(startModelServer({ script: { responses: [{ hang: false }] } }), InvalidScriptError);
});

test("hermeticEnv gives one run its own directories, the base URL and few retries", () => {
  const hermetic = hermeticEnv({ baseUrl: "http://127.0.0.1:1" });
  try {
    for (const key of ["CLAUDE_CONFIG_DIR", "TMPDIR", "CLAUDE_CODE_TMPDIR", "XDG_RUNTIME_DIR", "HOME"]) {
      assert.ok(hermetic.env[key]!.startsWith(hermetic.dirs.root), key);
    }
    assert.equal(hermetic.env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:1");
    assert.equal(hermetic.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
    assert.equal(hermetic.env["CLAUDE_CODE_MAX_RETRIES"], "0");
    assert.equal(hermetic.env["IS_SANDBOX"], undefined);
    assert.ok(hermetic.env["ANTHROPIC_API_KEY"]!.length > 0);
    assert.equal(
      hermeticEnv({ baseUrl: "x", root: hermetic.dirs.root + "/nested", sandboxed: true, maxRetries: 2 }).env[
        "IS_SANDBOX"
      ],
      "1",
    );
  } finally {
    hermetic.cleanup();
  }
  assert.throws(() => writeFileSync(join(hermetic.dirs.config, "x"), ""), "cleanup removed the directories");
  assert.match(pinnedClaudeBin(), /@anthropic-ai\/claude-code\/bin\/claude\.exe$/);
});

test("turnstream model-server serves a script file until SIGTERM", async (context) => {
  const dir = mkdtempSync(join(tmpdir(), "ms-cmd-"));
  context.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "script.json");
  writeFileSync(file, JSON.stringify({ responses: [{ content: [{ type: "text", text: "from the command" }] }] }));
  const child = spawn(
    process.execPath,
    [join(import.meta.dirname, "../../src/bin/turnstream.ts"), "model-server", "--script", file],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)\n/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once("exit", () => reject(new Error(`exited before listening: ${out}`)));
  });
  const res = await fetch(`${url}/v1/messages`, { method: "POST", body: JSON.stringify(ask("x", { stream: false })) });
  assert.equal(((await res.json()) as any).content[0].text, "from the command");
  child.kill("SIGTERM");
  assert.equal(await exited, 0);

  writeFileSync(file, JSON.stringify({ responses: [{ error: { status: 99 } }] }));
  const bad = spawn(
    process.execPath,
    [join(import.meta.dirname, "../../src/bin/turnstream.ts"), "model-server", "--script", file],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let err = "";
  bad.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
  assert.equal(await new Promise((r) => bad.once("exit", r)), 2);
  assert.match(err, /responses\.0\.error\.status/);
});
