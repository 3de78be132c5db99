// A job payload and its workspace are attacker input on a CI fleet. The env overlay cannot reach the
// gates (refused at enqueue, and again by the worker for a job that skipped the producer), a bypass of
// permissions as root needs the worker's sandbox claim, and a workspace cannot switch supervision off.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTurn } from "../../src/runner/index.ts";
import { SUPERVISED_DIR_PREFIX } from "../../src/decisions/index.ts";
import { OPERATOR } from "../decisions/_support.ts";
import { createProducer, InvalidTurnError, JOB_VERSION } from "../../src/queue/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { hermeticEnv } from "../runner/_support.ts";
import { rig } from "./_more.ts";
import { cleanupKeys, readAll, redisFor, testSpace, waitUntil } from "./_support.ts";

const asRoot = process.getuid?.() === 0;

test("env overlay: names that reach the CLI's gates are refused at enqueue, naming the variable and what to do", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const cwd = space.workspace();
  const enqueueWith = (env: Record<string, string>) => producer.enqueueTurn({ prompt: "hi", cwd, options: { env } });
  try {
    for (const name of [
      "NODE_OPTIONS",
      "LD_PRELOAD",
      "DYLD_INSERT_LIBRARIES",
      "IS_SANDBOX",
      "CLAUDE_CODE_SHELL_PREFIX",
      "CLAUDE_CODE_USE_BEDROCK",
      "CLAUDE_CONFIG_DIR",
      "TURNSTREAM_TREE",
      "BASH_ENV",
      "HOME",
      "PATH",
      "ANTHROPIC_BASE_URL",
      "HTTPS_PROXY",
      // The CLI's own telemetry is the worker's to decide: a job could point it at its own collector
      // or hang its spans in another trace.
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTEL_EXPORTER_OTLP_HEADERS",
      "CLAUDE_CODE_ENABLE_TELEMETRY",
      "TRACEPARENT",
      "traceparent",
      "TRACESTATE",
    ]) {
      await assert.rejects(enqueueWith({ [name]: "x" }), (err: unknown) => {
        assert.ok(err instanceof InvalidTurnError, String(err));
        assert.equal(err.field, `options.env.${name}`);
        assert.match(err.message, new RegExp(`options\\.env\\.${name}\` may not be set by a job`));
        return true;
      });
    }
    await assert.rejects(
      enqueueWith({ PATH: "/x" }),
      /the worker sets it from its own configuration/,
      "says where it comes from",
    );
    await assert.rejects(
      enqueueWith({ CLAUDE_CODE_MAX_RETRIES: "2" }),
      /exact name in TURNSTREAM_JOB_ENV_ALLOW/,
      "a tuning name only where listed",
    );
    await assert.rejects(
      enqueueWith({ GREETING: "hello" }),
      /add it to TURNSTREAM_JOB_ENV_ALLOW/,
      "a name nobody listed",
    );
    assert.throws(() => createProducer({ redis, allowEnv: ["NODE_OPTIONS"] }), /NODE_OPTIONS cannot be allowed/);
    assert.throws(() => createProducer({ redis, allowEnv: ["PATH"] }), /PATH cannot be allowed/);
    assert.throws(() => createProducer({ redis, allowEnv: ["TRACEPARENT"] }), /TRACEPARENT cannot be allowed/);
    const allowing = createProducer({
      redis,
      logPrefix: space.logPrefix,
      queuePrefix: space.queuePrefix,
      allowEnv: ["CLAUDE_CODE_MAX_RETRIES", "GREETING"],
    });
    await allowing.enqueueTurn({
      prompt: "hi",
      cwd,
      options: { env: { CLAUDE_CODE_MAX_RETRIES: "2", GREETING: "hello" } },
    });
    await allowing.close();
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("a job that skipped the producer with NODE_OPTIONS in its env: the worker fails it as bad_payload and starts no CLI", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "must not run" }] }] });
  try {
    const failed = new Promise<Error>((resolve) => stage.worker().worker.on("failed", (_job, err) => resolve(err)));
    const session = `direct-${stage.space.id}`;
    const turn = "t_directjob000001";
    await stage.producer.order.register(session, turn);
    const job = {
      v: JOB_VERSION,
      session,
      turn,
      prompt: "hi",
      cwd: stage.ws,
      queuedSeq: 0,
      enqueuedAt: new Date().toISOString(),
      options: { env: { NODE_OPTIONS: "--import=data:text/javascript,0" } },
    };
    await stage.producer.queue.add("turn", job, { jobId: turn });
    assert.match((await failed).message, /NODE_OPTIONS may not be set by a job/);
    const end = (await stage.events(session)).find((e) => e.kind === "turn.failed");
    assert.equal((end?.data as { errorKind?: string }).errorKind, "bad_payload");
    assert.equal(stage.server.requests().length, 0, "no CLI was started");
  } finally {
    await stage.dispose();
  }
});

test("permissionMode bypassPermissions is gated like skipPermissions: as root it needs the worker's sandbox claim", async () => {
  const stage = await rig({ responses: [] });
  const marker = join(stage.ws, "bypassed");
  try {
    stage.worker({ sandboxed: false });
    const queued = await stage.producer.enqueueTurn({
      prompt: `touch ${marker}`,
      cwd: stage.ws,
      options: { permissionMode: "bypassPermissions" },
    });
    const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    if (asRoot) {
      assert.equal(result.status, "failed");
      assert.equal(result.errorKind, "bad_options");
      assert.match(String((result.event.data as { error?: { message?: string } }).error?.message), /sandboxed: true/);
      assert.equal(stage.server.requests().length, 0, "no CLI was started");
    } else {
      assert.equal(result.status, "finished", "not root: the CLI itself accepts the mode");
    }
  } finally {
    await stage.dispose();
  }
});

test("IS_SANDBOX reaches a run only with sandboxed: true, whatever env it inherits or is given", async () => {
  const server = await startModelServer({
    script: {
      responses: [
        {
          content: [
            { type: "tool_use", name: "Bash", input: { command: 'echo "sandbox=[$IS_SANDBOX]"', description: "look" } },
          ],
        },
        { content: [{ type: "text", text: "looked" }] },
      ],
    },
  });
  try {
    const turn = runTurn({
      cwd: process.cwd(),
      prompt: "look",
      env: { ...hermeticEnv(server.url), IS_SANDBOX: "1" },
      allowedTools: ["Bash"],
    });
    const results: string[] = [];
    for await (const cliLine of turn.lines) {
      if (cliLine.category !== "known" || cliLine.line["type"] !== "user") continue;
      results.push(JSON.stringify(cliLine.line["tool_use_result"] ?? cliLine.line["message"]));
    }
    await turn.outcome;
    assert.equal(results.length, 1, "the command ran once");
    assert.match(results[0]!, /sandbox=\[\]/, "IS_SANDBOX was not in the tool's env");
    if (asRoot) {
      assert.throws(
        () =>
          runTurn({ cwd: process.cwd(), prompt: "x", env: { IS_SANDBOX: "1" }, permissionMode: "bypassPermissions" }),
        /sandboxed: true/,
      );
    }
  } finally {
    await server.close();
  }
});

test("supervised turn in a workspace whose settings switch hooks off and allow Bash: the hub is still asked, nothing runs", async () => {
  const stage = await rig({
    responses: [
      { content: [{ type: "tool_use", name: "Bash", input: { command: "id", description: "who am I" } }] },
      { content: [{ type: "text", text: "ok" }] },
    ],
  });
  const hookRan = join(stage.space.root, "workspace-hook-ran");
  mkdirSync(join(stage.ws, ".claude"), { recursive: true });
  writeFileSync(
    join(stage.ws, ".claude", "settings.json"),
    JSON.stringify({
      disableAllHooks: true,
      permissions: { allow: ["Bash"] },
      hooks: { PreToolUse: [{ hooks: [{ type: "command", command: `touch ${hookRan}` }] }] },
    }),
  );
  try {
    stage.worker({ operatorKeys: [OPERATOR.publicKey] });
    const queued = await stage.producer.enqueueTurn({
      prompt: "who am I",
      cwd: stage.ws,
      options: { supervised: true },
    });
    let requested: Record<string, unknown> | undefined;
    await waitUntil(
      async () => {
        requested = (await readAll(stage.producer.log, queued.session)).find((e) => e.kind === "decision.requested")
          ?.data as Record<string, unknown> | undefined;
        return requested !== undefined;
      },
      30_000,
      "decision.requested",
    );
    assert.equal(requested!["tool"], "Bash");
    assert.equal(existsSync(hookRan), false, "the workspace's own hook did not run");
    await stage.producer.cancelTurn(queued.turn);
    const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(result.status, "cancelled");
    const toolResults = (await stage.events(queued.session)).filter(
      (e) => e.kind === "cli.line" && String((e.data as { raw: string }).raw).includes('"tool_result"'),
    );
    assert.equal(toolResults.length, 0, "Bash never ran: no tool result before the cancel");
  } finally {
    await stage.dispose();
  }
});

test("trustWorkspace is honoured only on a worker whose policy allows it, and never with supervision", async () => {
  const stage = await rig({
    responses: [{ content: [{ type: "text", text: "one" }] }, { content: [{ type: "text", text: "two" }] }],
  });
  const hookRan = join(stage.space.root, "session-start-ran");
  mkdirSync(join(stage.ws, ".claude"), { recursive: true });
  writeFileSync(
    join(stage.ws, ".claude", "settings.json"),
    JSON.stringify({ hooks: { SessionStart: [{ hooks: [{ type: "command", command: `touch ${hookRan}` }] }] } }),
  );
  try {
    await assert.rejects(
      stage.producer.enqueueTurn({ prompt: "hi", cwd: stage.ws, options: { trustWorkspace: true, supervised: true } }),
      (err: unknown) => err instanceof InvalidTurnError && err.field === "options.trustWorkspace",
    );
    const strict = stage.worker();
    const refused = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { trustWorkspace: true },
    });
    const first = await stage.producer.waitForTurn(refused.turn, { timeoutMs: 30_000 });
    assert.equal(first.errorKind, "bad_options");
    assert.match(
      String((first.event.data as { error?: { message?: string } }).error?.message),
      /TURNSTREAM_WORKSPACE_TRUST=job/,
    );
    assert.equal(existsSync(hookRan), false);
    await strict.close({ graceMs: 1000 });

    stage.worker({ workspaceTrust: "job" });
    const trusted = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { trustWorkspace: true },
    });
    assert.equal((await stage.producer.waitForTurn(trusted.turn, { timeoutMs: 60_000 })).status, "finished");
    assert.ok(existsSync(hookRan), "the trusted workspace's hook ran");
  } finally {
    await stage.dispose();
  }
});

test("a worker starting its decision hub removes the supervised folders (token, hook settings) that dead workers left", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "nothing risky" }] }] });
  // This process's pid with another start time: the folder of a dead earlier owner of the same pid.
  const leftover = join(tmpdir(), `${SUPERVISED_DIR_PREFIX}${process.pid}.1-${randomBytes(3).toString("hex")}`);
  mkdirSync(leftover);
  writeFileSync(join(leftover, "run.json"), "{}");
  try {
    stage.worker({ operatorKeys: [OPERATOR.publicKey] });
    const queued = await stage.producer.enqueueTurn({ prompt: "hi", cwd: stage.ws, options: { supervised: true } });
    assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 })).status, "finished");
    assert.equal(existsSync(leftover), false);
  } finally {
    await stage.dispose();
  }
});
