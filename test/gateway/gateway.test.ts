// The model gateway with the real CLI and the scripted model server as its upstream: the run holds
// only its token (its env and every process of its tree), the upstream sees the worker's key, tokens
// are refused once revoked, the policy door refuses and delays (and shows each request's hooks one
// call object, the upstream's status at its headers), bodies are bounded, and each call's usage adds
// up to the CLI's own result line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, realpathSync, utimesSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTurn } from "../../src/runner/index.ts";
import {
  credentialFrom,
  OAUTH_BETA,
  startGateway,
  UsageTap,
  type GatewayPolicy,
  type ModelCall,
  type ModelGateway,
  type PolicyCall,
  type RunGrant,
} from "../../src/gateway/index.ts";
import { startModelServer, hermeticEnv, type ModelServer } from "../../src/testing/index.ts";
import type { ParsedLine } from "../../src/protocol/index.ts";

const canary = (): string => `sk-ant-api03-${randomBytes(24).toString("base64url")}`;

interface Stage {
  server: ModelServer;
  gateway: ModelGateway;
  grant: RunGrant;
  calls: ModelCall[];
  key: string;
  close(): Promise<void>;
}

async function stage(responses: unknown[], policy?: GatewayPolicy): Promise<Stage> {
  const key = canary();
  const server = await startModelServer({ script: { responses }, credential: key });
  const gateway = await startGateway({ policy });
  const calls: ModelCall[] = [];
  const credential = credentialFrom({ ANTHROPIC_API_KEY: key }, undefined)!;
  const grant = gateway.issue(
    { baseUrl: new URL(server.url), credential },
    { binding: { session: "s1", turn: "t1", attempt: 1 }, onCall: (c) => calls.push(c) },
  );
  return { server, gateway, grant, calls, key, close: async () => (await gateway.close(), await server.close()) };
}

/** One CLI turn through the gateway; its parsed lines. */
async function turnThrough(
  staged: Stage,
  prompt: string,
  extra: Record<string, unknown> = {},
): Promise<{ lines: ParsedLine[]; result: Record<string, any> | undefined; error: unknown; pid: number | undefined }> {
  const run = hermeticEnv({});
  const cwd = realpathSync(mkdtempSync(join(tmpdir(), "ts-gw-ws-")));
  const handle = runTurn({ cwd, prompt, env: { ...run.env, ...staged.gateway.runEnv(staged.grant) }, ...extra });
  const lines: ParsedLine[] = [];
  for await (const line of handle.lines) lines.push(line);
  const error = await handle.outcome.then(
    () => undefined,
    (e: unknown) => e,
  );
  run.cleanup();
  const resultLine = lines.find((l) => l.type.startsWith("result"));
  return {
    lines,
    result: resultLine === undefined ? undefined : (JSON.parse(resultLine.raw) as Record<string, any>),
    error,
    pid: handle.pid,
  };
}

// Every process of the run's tree carries TURNSTREAM_TREE: read each one's environ, and the shell's own.
const DUMP_TREE_ENV =
  'env; for f in $(grep -lzx "TURNSTREAM_TREE=$TURNSTREAM_TREE" /proc/[0-9]*/environ 2>/dev/null); do echo "== $f"; tr "\\0" "\\n" < $f; done';

const toolOutputs = (lines: ParsedLine[]): string =>
  lines
    .filter((l) => l.type === "user")
    .map((l) => l.raw)
    .join("\n");

test("a run's tree holds only its token; the upstream gets the worker's key; the calls add up to the result line", async () => {
  const staged = await stage([
    {
      content: [{ type: "tool_use", name: "Bash", input: { command: DUMP_TREE_ENV } }],
      usage: { input_tokens: 1200, output_tokens: 40, cache_read_input_tokens: 300 },
    },
    {
      content: [{ type: "text", text: "all read" }],
      usage: { input_tokens: 2000, output_tokens: 25, cache_creation_input_tokens: 500 },
    },
  ]);
  try {
    const { lines, result, error, pid } = await turnThrough(staged, "dump the environment", {
      allowedTools: ["Bash"],
      model: "claude-sonnet-4-5-20250929",
    });
    assert.equal(error, undefined, String(error));
    const out = toolOutputs(lines);
    assert.match(out, /== \/proc\/\d+\/environ/, "the tree's environs were read");
    assert.ok(out.includes(`== /proc/${pid}/environ`), "the CLI's own among them");
    assert.ok(out.includes(`ANTHROPIC_API_KEY=${staged.grant.token}`), "the run sees its token");
    assert.equal(out.includes(staged.key), false, "no process of the run holds the worker's key");
    assert.equal(
      lines.some((l) => l.raw.includes(staged.key)),
      false,
    );
    // The model server accepts only the worker's key: the turn finished, so every request carried it.
    assert.equal(result?.["is_error"], false);
    const messages = staged.calls.filter((c) => c.path === "/v1/messages");
    assert.equal(messages.length, 2);
    for (const call of messages) {
      assert.equal(call.status, 200);
      assert.equal(call.stream, true);
      assert.ok(call.ttfbMs !== undefined && call.ttfbMs <= call.durationMs);
      assert.equal(call.model, "claude-sonnet-4-5-20250929");
    }
    const sum = (
      field: "input_tokens" | "output_tokens" | "cache_read_input_tokens" | "cache_creation_input_tokens",
    ): number => messages.reduce((n, c) => n + (c.usage?.[field] ?? 0), 0);
    assert.equal(sum("input_tokens"), result!["usage"]["input_tokens"]);
    assert.equal(sum("output_tokens"), result!["usage"]["output_tokens"]);
    assert.equal(sum("cache_read_input_tokens"), result!["usage"]["cache_read_input_tokens"]);
    assert.equal(sum("cache_creation_input_tokens"), result!["usage"]["cache_creation_input_tokens"]);
    const cost = messages.reduce((n, c) => n + (c.costUsd ?? 0), 0);
    assert.ok(Math.abs(cost - result!["total_cost_usd"]) < 1e-9, `gateway ${cost} vs CLI ${result!["total_cost_usd"]}`);
  } finally {
    await staged.close();
  }
});

test("no token, a wrong token and a revoked token get 401 with an Anthropic error body", async () => {
  const staged = await stage([{ content: [{ type: "text", text: "hi" }] }]);
  try {
    const post = (headers: Record<string, string>) =>
      fetch(`${staged.gateway.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ model: "m", messages: [] }),
      });
    const wrong: Array<Record<string, string>> = [
      {},
      { "x-api-key": "turnstream-gw-" + "A".repeat(43) },
      { authorization: `Bearer ${staged.key}` },
      { "x-api-key": staged.grant.token.slice(0, -1) },
    ];
    for (const headers of wrong) {
      const res = await post(headers);
      assert.equal(res.status, 401);
      const body = (await res.json()) as { type: string; error: { type: string; message: string } };
      assert.equal(body.type, "error");
      assert.equal(body.error.type, "authentication_error");
    }
    // The live token passes, as x-api-key or as a bearer token.
    assert.equal((await post({ "x-api-key": staged.grant.token })).status, 200);
    assert.equal((await post({ authorization: `Bearer ${staged.grant.token}` })).status, 200);
    staged.grant.revoke();
    const after = await post({ "x-api-key": staged.grant.token });
    assert.equal(after.status, 401);
    assert.equal(((await after.json()) as { error: { type: string } }).error.type, "authentication_error");
    assert.equal(staged.gateway.liveTokens, 0);
  } finally {
    await staged.close();
  }
});

test("only the model endpoints are forwarded; a body over the bound gets 413; the key never comes back", async () => {
  const key = canary();
  const server = await startModelServer({ script: { responses: [] }, credential: key });
  const gateway = await startGateway({ maxRequestBytes: 1024 });
  const grant = gateway.issue(
    { baseUrl: new URL(server.url), credential: credentialFrom({ ANTHROPIC_API_KEY: key }, undefined)! },
    { binding: { session: "s" }, onCall: () => undefined },
  );
  try {
    const headers = { "x-api-key": grant.token, "content-type": "application/json" };
    for (const path of ["/v1/files", "/v1/messages/batches", "/v1/organizations/api_keys", "/_requests"]) {
      const res = await fetch(gateway.url + path, { headers });
      assert.equal(res.status, 404, path);
      assert.equal(((await res.json()) as { error: { type: string } }).error.type, "not_found_error");
    }
    // A request target cannot move the upstream or climb out of the forwarded paths.
    for (const target of [
      "//[",
      "http://[::1",
      "http://169.254.169.254/latest/meta-data",
      "/v1/messages/../files",
      "/v1/messages/%2e%2e/files",
      "//evil.example/v1/messages",
    ]) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(gateway.url, { method: "GET", path: target, headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", reject);
        req.end();
      });
      assert.ok(status === 404 || status === 400, `${target}: ${status}`);
    }
    // The CLI's connectivity check is answered by the gateway itself.
    assert.equal((await fetch(`${gateway.url}/api/hello`, { method: "HEAD" })).status, 200);
    assert.equal(server.requests().length, 0, "none reached the upstream");
    const big = await fetch(`${gateway.url}/v1/messages`, { method: "POST", headers, body: "x".repeat(2048) });
    assert.equal(big.status, 413);
    assert.equal(((await big.json()) as { error: { type: string } }).error.type, "request_too_large");
    const counted = await fetch(`${gateway.url}/v1/messages/count_tokens`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(counted.status, 200);
    const text = JSON.stringify([...counted.headers]) + (await counted.text());
    assert.equal(text.includes(key), false);
    // The upstream saw the key and never the token.
    const seen = server.requests().find((r) => r.kind === "count_tokens");
    assert.ok(seen !== undefined);
  } finally {
    await gateway.close();
    await server.close();
  }
});

test("the stream passes through as it arrives, not once it is whole", async () => {
  const staged = await stage([{ content: [{ type: "text", text: "one two three four five six" }], chunkDelayMs: 150 }]);
  try {
    const res = await fetch(`${staged.gateway.url}/v1/messages?beta=true`, {
      method: "POST",
      headers: {
        "x-api-key": staged.grant.token,
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
      },
      body: JSON.stringify({
        model: "claude-sonnet-4-5",
        stream: true,
        max_tokens: 10,
        messages: [{ role: "user", content: "hi" }],
        tools: [{ name: "x" }],
      }),
    });
    assert.equal(res.headers.get("content-type")?.includes("text/event-stream"), true);
    const started = performance.now();
    const arrivals: number[] = [];
    let body = "";
    for await (const chunk of res.body!) {
      arrivals.push(performance.now() - started);
      body += Buffer.from(chunk).toString();
    }
    assert.match(body, /message_stop/);
    // Six-plus events 150 ms apart: the first must arrive long before the last.
    assert.ok(arrivals.length >= 4, `chunks: ${arrivals.length}`);
    assert.ok(arrivals.at(-1)! - arrivals[0]! > 450, `arrivals ${arrivals.map(Math.round).join(",")}`);
    assert.equal(staged.calls.length, 1);
    assert.equal(staged.calls[0]!.usage?.output_tokens, 6);
  } finally {
    await staged.close();
  }
});

test("a policy that refuses: the CLI sees the error; one that delays: the call waits", async () => {
  let refused = 0;
  const refuse: GatewayPolicy = {
    beforeRequest: (call) => {
      assert.equal(call.run.session, "s1");
      assert.match(call.credentialFingerprint, /^[0-9a-f]{16}$/);
      refused++;
      return {
        action: "refuse",
        status: 429,
        type: "rate_limit_error",
        message: "fleet cooldown after a 429",
        retryAfterS: 30,
      };
    },
  };
  const refusedStage = await stage([{ content: [{ type: "text", text: "never" }] }], refuse);
  try {
    const { result, lines } = await turnThrough(refusedStage, "hi");
    assert.ok(refused >= 1);
    assert.equal(refusedStage.server.requests().length, 0, "nothing reached the upstream");
    assert.match(lines.map((l) => l.raw).join("\n"), /fleet cooldown after a 429/);
    assert.equal(result?.["is_error"], true);
    assert.equal(refusedStage.calls[0]?.answeredBy, "policy");
    assert.equal(refusedStage.calls[0]?.retryAfterS, 30);
  } finally {
    await refusedStage.close();
  }
  const seen: ModelCall[] = [];
  const delay: GatewayPolicy = {
    beforeRequest: () => ({ action: "delay", ms: 400 }),
    afterResponse: (_call, outcome) => void seen.push(outcome),
  };
  const delayedStage = await stage([{ content: [{ type: "text", text: "late" }] }], delay);
  try {
    const { result } = await turnThrough(delayedStage, "hi");
    assert.equal(result?.["result"], "late");
    const call = delayedStage.calls.find((c) => c.path === "/v1/messages")!;
    assert.ok(call.durationMs >= 400 && call.ttfbMs! >= 400, JSON.stringify(call));
    assert.equal(seen.length, delayedStage.calls.length);
  } finally {
    await delayedStage.close();
  }
});

test("an OAuth token (the operator's credentials file or CLAUDE_CODE_OAUTH_TOKEN) goes upstream as a bearer token with the OAuth beta, read anew when the file changes", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ts-gw-oauth-"));
  const file = join(dir, ".credentials.json");
  writeFileSync(
    file,
    JSON.stringify({ claudeAiOauth: { accessToken: "sk-ant-oat01-first", refreshToken: "sk-ant-ort01-never-used" } }),
  );
  const server = await startModelServer({ script: { responses: [] }, credential: "sk-ant-oat01-second" });
  const gateway = await startGateway();
  const credential = credentialFrom({}, file)!;
  assert.equal(credential.kind, "oauth");
  assert.equal(
    credentialFrom({ CLAUDE_CODE_OAUTH_TOKEN: "sk-ant-oat01-env" }, file)!.source,
    "CLAUDE_CODE_OAUTH_TOKEN",
  );
  assert.equal(credentialFrom({ ANTHROPIC_AUTH_TOKEN: "tok" }, file)!.headers()["authorization"], "Bearer tok");
  const grant = gateway.issue(
    { baseUrl: new URL(server.url), credential },
    { binding: { session: "s" }, onCall: () => undefined },
  );
  try {
    const post = () =>
      fetch(`${gateway.url}/v1/messages/count_tokens`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${grant.token}`,
          "anthropic-beta": "claude-code-20250219",
          "content-type": "application/json",
        },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
      });
    assert.equal((await post()).status, 401, "the upstream wants the second token");
    // The operator logs in again: the file changes, and the gateway uses the new token.
    writeFileSync(file, JSON.stringify({ claudeAiOauth: { accessToken: "sk-ant-oat01-second" } }));
    const later = new Date(Date.now() + 5000);
    utimesSync(file, later, later);
    assert.equal((await post()).status, 200);
    const beta = server.requests().at(-1)!.headers["anthropic-beta"];
    assert.equal(beta, `claude-code-20250219,${OAUTH_BETA}`);
  } finally {
    await gateway.close();
    await server.close();
  }
});

test("usage is read from SSE events split anywhere across chunks, and from a JSON answer", () => {
  const sse =
    'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-haiku-4-5","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":3}}}\n\n' +
    'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"data: {\\"type\\":\\"message_delta\\"}"}}\n\n' +
    'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":7}}\n\n';
  for (const size of [1, 7, 64, sse.length]) {
    const tap = new UsageTap("text/event-stream");
    for (let offset = 0; offset < sse.length; offset += size) tap.feed(Buffer.from(sse.slice(offset, offset + size)));
    assert.deepEqual(tap.result(), {
      model: "claude-haiku-4-5",
      usage: { input_tokens: 10, output_tokens: 7, cache_read_input_tokens: 3, cache_creation_input_tokens: 0 },
    });
  }
  const json = new UsageTap("application/json");
  json.feed(Buffer.from('{"type":"message","model":"m","usage":{"input_tokens":4,'));
  json.feed(Buffer.from('"output_tokens":2}}'));
  assert.deepEqual(json.result().usage, {
    input_tokens: 4,
    output_tokens: 2,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  });
  const error = new UsageTap("application/json");
  error.feed(Buffer.from('{"type":"error","error":{"type":"overloaded_error"}}'));
  assert.equal(error.result().usage, undefined);
  // An error event inside a stream, however it is cut; a type that is not a plain name is not kept.
  const failed = (type: unknown) =>
    `event: message_start\ndata: {"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}\n\n` +
    `event: error\ndata: ${JSON.stringify({ type: "error", error: { type, message: "x" } })}\n\n`;
  for (const [type, kept] of [
    ["overloaded_error", "overloaded_error"],
    ["<img src=x onerror=alert(1)>", "other_error"],
    ["x".repeat(100), "other_error"],
    [{ nested: true }, "other_error"],
  ] as const) {
    const sseText = failed(type);
    for (const size of [1, 5, sseText.length]) {
      const tap = new UsageTap("text/event-stream");
      for (let offset = 0; offset < sseText.length; offset += size)
        tap.feed(Buffer.from(sseText.slice(offset, offset + size)));
      assert.equal(tap.streamError, kept, `${JSON.stringify(type)} in pieces of ${size}`);
    }
  }
  assert.equal(new UsageTap("text/event-stream").streamError, undefined);
});

test("a policy that throws or answers a status HTTP cannot carry fails that request, never the gateway", async () => {
  let requestCount = 0;
  const policy: GatewayPolicy = {
    beforeRequest: () => {
      requestCount++;
      if (requestCount === 1) throw new Error("policy store down");
      if (requestCount === 2) return { action: "refuse", status: 99, type: "x", message: "bad status" };
      return { action: "allow" };
    },
  };
  const staged = await stage([{ content: [{ type: "text", text: "fine" }] }], policy);
  try {
    const post = () =>
      fetch(`${staged.gateway.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": staged.grant.token, "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
      });
    for (const expected of [500, 500, 200]) {
      const res = await post();
      assert.equal(res.status, expected);
      if (expected === 500) assert.equal(((await res.json()) as { error: { type: string } }).error.type, "api_error");
      else await res.text();
    }
  } finally {
    await staged.close();
  }
});

test("every hook of one request gets the same call object; the upstream's status comes at its headers, before a slow body ends", async () => {
  const seen: Array<{ hook: string; call: PolicyCall; at: number; status?: number }> = [];
  const policy: GatewayPolicy = {
    beforeRequest: (call) => (seen.push({ hook: "before", call, at: performance.now() }), { action: "allow" }),
    onUpstreamAnswer: (call, answer) =>
      void seen.push({ hook: "answer", call, at: performance.now(), status: answer.status }),
    afterResponse: (call, outcome) =>
      void seen.push({ hook: "after", call, at: performance.now(), status: outcome.status }),
  };
  // Eight events 150 ms apart: the body takes over a second after the headers.
  const staged = await stage([{ content: [{ type: "text", text: "slow" }], chunkDelayMs: 150 }], policy);
  try {
    const res = await fetch(`${staged.gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": staged.grant.token, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    await res.text();
    assert.deepEqual(
      seen.map((s) => [s.hook, s.status]),
      [
        ["before", undefined],
        ["answer", 200],
        ["after", 200],
      ],
    );
    assert.ok(seen[1]!.call === seen[0]!.call && seen[2]!.call === seen[0]!.call, "one object for the request");
    assert.equal(seen[0]!.call.signal?.aborted, false, "the client did not hang up");
    assert.ok(seen[2]!.at - seen[1]!.at > 600, `the status came ${seen[2]!.at - seen[1]!.at} ms before the body's end`);
  } finally {
    await staged.close();
  }
});
