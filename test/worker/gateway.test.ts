// The worker's model gateway with the real CLI: a turn's whole process tree holds only the run's
// token (the model server, which accepts only the worker's key, still answers every call), the token
// is refused once the run has ended, each model call is one model.call event whose usage adds up to
// the CLI's own result line, spans and read models count the same calls, and the worker's key is in no
// event, span or log line. A warm session's token lives with its kept process and is bound to no turn
// between turns. The fleet cooldown is on: a 429 another worker met holds this worker's model call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SpanStatusCode } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ATTEMPT_SPAN_NAME } from "../../src/telemetry/index.ts";
import { fold } from "../../src/projector/index.ts";
import { startTurnWorker, WorkerConfigError } from "../../src/worker/index.ts";
import { credentialFrom, FleetCooldown, listCooldowns } from "../../src/gateway/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { cliLines, dataOf, rig } from "./_more.ts";

const canary = (): string => `sk-ant-api03-${randomBytes(24).toString("base64url")}`;

// `env`, then the environ of every process of the run's tree (each carries TURNSTREAM_TREE), and the
// gateway's address and the run's token into a file, to try it after the run.
const dumpTree = (file: string): string =>
  `env; for f in $(grep -lzx "TURNSTREAM_TREE=$TURNSTREAM_TREE" /proc/[0-9]*/environ 2>/dev/null); do echo "== $f"; tr "\\0" "\\n" < $f; done; ` +
  `printf '%s\\n%s' "$ANTHROPIC_BASE_URL" "$ANTHROPIC_API_KEY" > ${file}`;

async function tryToken(file: string): Promise<number> {
  const [url, token] = readFileSync(file, "utf8").split("\n");
  const res = await fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": token!, "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [] }),
  });
  const body = (await res.json()) as { error?: { type?: string } };
  if (res.status === 401) assert.equal(body.error?.type, "authentication_error");
  return res.status;
}

const toolOutput = (events: Envelope[]): string =>
  cliLines(events, 1)
    .filter((l) => l["type"] === "user")
    .map((l) => JSON.stringify(l))
    .join("\n");

test("a brokered turn: no process of the run holds the worker's key; each call is a model.call that adds up to the result line; the token dies with the run", async () => {
  const key = canary();
  const stage = await rig(
    (ws: string) => ({
      responses: [
        {
          content: [
            { type: "tool_use", name: "Bash", input: { command: dumpTree(join(ws, ".gw")), description: "env" } },
          ],
          usage: { input_tokens: 900, output_tokens: 30, cache_read_input_tokens: 200 },
        },
        {
          content: [{ type: "text", text: "read" }],
          usage: { input_tokens: 1500, output_tokens: 20, cache_creation_input_tokens: 400 },
        },
      ],
    }),
    { credential: key },
  );
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const logged: string[] = [];
  const logger = {
    debug: (...a: unknown[]) => void logged.push(JSON.stringify(a)),
    info: (...a: unknown[]) => void logged.push(JSON.stringify(a)),
    warn: (...a: unknown[]) => void logged.push(JSON.stringify(a)),
    error: (...a: unknown[]) => void logged.push(JSON.stringify(a)),
  };
  try {
    // The tool sandbox off: its pid namespace would hide the CLI's environ from the tool, and the
    // gateway must hold where the sandbox does not.
    const toolSandbox = { mode: "off" as const };
    stage.worker({
      tracer: provider.getTracer("test"),
      sandboxed: true,
      logger,
      runEnv: { ANTHROPIC_API_KEY: key },
      toolSandbox,
    });
    const queued = await stage.producer.enqueueTurn({
      prompt: "show the environment",
      cwd: stage.ws,
      options: { skipPermissions: true, model: "claude-sonnet-4-5-20250929" },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 90_000 });
    // The model server answers only the worker's key: the turn finishing proves every call carried it.
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const events = await stage.events(queued.session, queued.turn);
    const out = toolOutput(events);
    assert.match(out, /== \/proc\/\d+\/environ/, "the tree's environs were read");
    const cliPid = dataOf(events.find((e) => e.kind === "cli.exit")!)["pid"];
    assert.ok(out.includes(`== /proc/${String(cliPid)}/environ`), "the CLI's own among them");
    assert.match(out, /ANTHROPIC_BASE_URL=http:\/\/127\.0\.0\.1:\d+/);
    assert.equal(out.includes(key), false, "no process of the run holds the worker's key");
    assert.equal(JSON.stringify(events).includes(key), false, "nor does any event");
    assert.equal(logged.join("\n").includes(key), false, "nor any log line");

    const calls = events.filter((e) => e.kind === "model.call").map((e) => dataOf(e));
    const messages = calls.filter((c) => c["path"] === "/v1/messages");
    assert.equal(messages.length, 2, JSON.stringify(calls));
    const result = cliLines(events, 1).find((l) => l["type"] === "result")!;
    const usage = result["usage"] as Record<string, number>;
    const sum = (k: string): number =>
      messages.reduce((n, c) => n + ((c["usage"] as Record<string, number>)[k] ?? 0), 0);
    for (const usageKey of ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"])
      assert.equal(sum(usageKey), usage[usageKey], usageKey);
    const cost = messages.reduce((n, c) => n + Number(c["costUsd"]), 0);
    assert.ok(
      Math.abs(cost - Number(result["total_cost_usd"])) < 1e-9,
      `${cost} vs ${String(result["total_cost_usd"])}`,
    );

    // The read models (and replay, which folds the same way) count the same calls.
    const view = fold(await stage.events(queued.session)).view.turns[0]!.attempts[0]!;
    assert.equal(view.modelCalls.calls, calls.length);
    assert.deepEqual(view.modelCalls.tokens, {
      input: usage["input_tokens"],
      output: usage["output_tokens"],
      cacheRead: usage["cache_read_input_tokens"],
      cacheCreation: usage["cache_creation_input_tokens"],
    });
    assert.ok(Math.abs(view.modelCalls.costUsd - view.costUsd) < 1e-9);

    // A span per call, under the attempt span; none holds the key.
    const spans = exporter.getFinishedSpans();
    const attempt = spans.find((s) => s.name === ATTEMPT_SPAN_NAME)!;
    const chats = spans.filter((s) => s.name === "chat claude-sonnet-4-5-20250929");
    assert.equal(chats.length, 2);
    for (const chat of chats) assert.equal(chat.parentSpanContext?.spanId, attempt.spanContext().spanId);
    assert.equal(JSON.stringify(spans.map((s) => [s.attributes, s.events])).includes(key), false);

    // The run has ended: its token is refused.
    assert.equal(await tryToken(join(stage.ws, ".gw")), 401);
  } finally {
    await stage.dispose();
    await provider.shutdown();
  }
});

test("a warm session keeps one token for its kept process, bound to each turn in turn and to none between them", async () => {
  const stage = await rig((ws: string) => ({
    responses: [
      {
        content: [
          { type: "tool_use", name: "Bash", input: { command: dumpTree(join(ws, ".gw1")), description: "env" } },
        ],
      },
      { content: [{ type: "text", text: "one" }] },
      {
        content: [
          { type: "tool_use", name: "Bash", input: { command: dumpTree(join(ws, ".gw2")), description: "env" } },
        ],
      },
      { content: [{ type: "text", text: "two" }] },
    ],
  }));
  try {
    stage.worker({ sandboxed: true });
    const firstTurn = await stage.producer.enqueueTurn({
      prompt: "first",
      cwd: stage.ws,
      options: { skipPermissions: true, warm: true },
    });
    assert.equal((await stage.producer.waitForTurn(firstTurn.turn, { timeoutMs: 90_000 })).status, "finished");
    // Kept, idle: its token is bound to no turn, so nothing can use it between turns.
    assert.equal(await tryToken(join(stage.ws, ".gw1")), 401);
    const secondTurn = await stage.producer.enqueueTurn({
      session: firstTurn.session,
      prompt: "second",
      cwd: stage.ws,
      options: { skipPermissions: true, warm: true },
    });
    assert.equal((await stage.producer.waitForTurn(secondTurn.turn, { timeoutMs: 90_000 })).status, "finished");
    const events = await stage.events(firstTurn.session);
    assert.deepEqual(
      events.filter((e) => e.kind === "attempt.started").map((e) => dataOf(e)["warm"]),
      ["none", "warm"],
    );
    assert.equal(
      readFileSync(join(stage.ws, ".gw1"), "utf8"),
      readFileSync(join(stage.ws, ".gw2"), "utf8"),
      "the kept process has one token",
    );
    const callsOf = (turn: string): number => events.filter((e) => e.kind === "model.call" && e.turn === turn).length;
    assert.equal(callsOf(firstTurn.turn), 2);
    assert.equal(callsOf(secondTurn.turn), 2);
  } finally {
    await stage.dispose();
  }
});

test("a streamed answer that ends in an overloaded_error event: its model.call says so, and the credential cools down for the fleet", async () => {
  const key = canary();
  const stage = await rig(
    {
      responses: [
        { streamError: { type: "overloaded_error", message: "Overloaded" } },
        { content: [{ type: "text", text: "after the overload" }] },
      ],
    },
    { credential: key },
  );
  const said: string[] = [];
  const ignore = (): void => undefined;
  const logger = { debug: ignore, warn: ignore, error: ignore, info: (_: unknown, msg: string) => void said.push(msg) };
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  try {
    stage.worker({ sandboxed: true, runEnv: { ANTHROPIC_API_KEY: key }, logger, tracer: provider.getTracer("test") });
    const queued = await stage.producer.enqueueTurn({ prompt: "hello", cwd: stage.ws });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 90_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const calls = (await stage.events(queued.session, queued.turn))
      .filter((e) => e.kind === "model.call")
      .map((e) => dataOf(e));
    assert.deepEqual(
      calls.map((call) => [call["status"], call["streamError"]]),
      [
        [200, "overloaded_error"],
        [200, undefined],
      ],
      "the first call failed inside its 200, the next one did not",
    );
    assert.ok(said.includes("model API limited the credential: the fleet holds its requests"), said.join("\n"));
    assert.ok(said.includes("model API answered the probe: the credential's cooldown ended"), "the next call probed");
    assert.deepEqual(await listCooldowns(stage.redis, stage.space.logPrefix), []);
    const chats = exporter.getFinishedSpans().filter((span) => span.name.startsWith("chat"));
    assert.deepEqual(
      chats.map((span) => [span.status.code, span.attributes["error.type"]]),
      [
        [SpanStatusCode.ERROR, "overloaded_error"],
        [SpanStatusCode.UNSET, undefined],
      ],
      "the failed call's span is an error though its status was 200",
    );
  } finally {
    await stage.dispose();
    await provider.shutdown();
  }
});

test("the fleet cooldown is on by default: a 429 another worker met holds this worker's model call until it ends", async () => {
  const key = canary();
  const stage = await rig(
    { responses: [{ content: [{ type: "text", text: "after the cooldown" }] }] },
    { credential: key },
  );
  try {
    // Another worker met a 429 for the same credential a moment ago (asked for 8 s: long enough for a
    // worker and its CLI to start on a loaded machine and ask while it lasts).
    const fingerprint = credentialFrom({ ANTHROPIC_API_KEY: key }, undefined)!.fingerprint();
    const other = new FleetCooldown({ redis: stage.redis, prefix: stage.space.logPrefix });
    other.onUpstreamAnswer(
      {
        callId: "elsewhere-1",
        run: { session: "elsewhere" },
        model: undefined,
        path: "/v1/messages",
        worstCaseUsd: 0.01,
        credentialFingerprint: fingerprint,
      },
      { status: 429, retryAfterMs: 8000 },
    );
    await other.flush();
    const [cooling] = await listCooldowns(stage.redis, stage.space.logPrefix);
    assert.equal(cooling?.fingerprint, fingerprint);
    const ends = Date.parse(cooling.until);

    stage.worker({ sandboxed: true, runEnv: { ANTHROPIC_API_KEY: key } });
    const queued = await stage.producer.enqueueTurn({ prompt: "hello", cwd: stage.ws });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 90_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const asked = stage.server.requests().filter((r) => r.kind === "messages");
    assert.equal(asked.length, 1, "one request, sent once the cooldown ended: no 429 reached the CLI");
    assert.ok(Date.parse(asked[0]!.at) >= ends - 50, `sent at ${asked[0]!.at}, the cooldown ended ${cooling.until}`);
    const [call] = (await stage.events(queued.session, queued.turn))
      .filter((e) => e.kind === "model.call")
      .map((e) => dataOf(e));
    assert.equal(call?.["status"], 200);
    const arrived = Date.parse(String(call?.["startedAt"]));
    assert.ok(arrived < ends, `the CLI asked during the cooldown (${String(call?.["startedAt"])})`);
    assert.ok(arrived + Number(call?.["durationMs"]) >= ends - 50, "and was held until it ended");
    assert.deepEqual(await listCooldowns(stage.redis, stage.space.logPrefix), [], "its success, the probe, ended it");
  } finally {
    await stage.dispose();
  }
});

test("Bedrock, Vertex and Foundry cannot be brokered: the worker refuses to start, naming the variable, unless passthrough is chosen", async () => {
  const stage = await rig({ responses: [] });
  try {
    assert.throws(
      () => stage.worker({ runEnv: { CLAUDE_CODE_USE_BEDROCK: "1" } }),
      (err: unknown) =>
        err instanceof WorkerConfigError &&
        err.variable === "CLAUDE_CODE_USE_BEDROCK" &&
        /TURNSTREAM_GATEWAY=passthrough/.test(err.message),
    );
    const passthroughWorker = startTurnWorker({
      redis: stage.redis,
      workspaceRoots: [stage.ws],
      logPrefix: stage.space.logPrefix,
      queuePrefix: stage.space.queuePrefix,
      autorun: false,
      gateway: "passthrough",
      runEnv: { CLAUDE_CODE_USE_VERTEX: "1" },
    });
    await passthroughWorker.close({ graceMs: 100 });
  } finally {
    await stage.dispose();
  }
});

test("a worker with no credential for its gateway fails the turn as auth, saying where one comes from, and starts no CLI", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "never" }] }] });
  try {
    const empty = stage.space.dir("no-operator");
    stage.worker({
      runEnv: { ANTHROPIC_API_KEY: "", ANTHROPIC_AUTH_TOKEN: "", CLAUDE_CODE_OAUTH_TOKEN: "" },
      secretEnv: { CLAUDE_CONFIG_DIR: empty },
    });
    const queued = await stage.producer.enqueueTurn({ prompt: "hi", cwd: stage.ws });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(res.status, "failed");
    const failed = dataOf(res.event);
    assert.equal(failed["errorKind"], "auth");
    assert.match(String((failed["error"] as { message: string }).message), /claude auth login/);
    assert.equal(stage.server.requests().length, 0);
  } finally {
    await stage.dispose();
  }
});
