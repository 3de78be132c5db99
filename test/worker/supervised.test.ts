// Supervised turns through the worker with the real CLI: each risky tool call waits for an operator
// (or a trust rule); allow runs it, deny refuses it, and an `always` allow becomes a rule the next
// turn uses without asking. Pre-approved tools, riskyTools and skipPermissions cannot bypass the hook;
// only unsupervisedTools narrows supervision, and a worker without operator keys runs no supervised turn.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { decide, listPending, type PendingRequest } from "../../src/decisions/index.ts";
import { MCP_PROBE, OPERATOR, operatorKey } from "../decisions/_support.ts";
import { createProducer, InvalidTurnError } from "../../src/queue/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startTurnWorker, workerConfigFromEnv, WorkerConfigError } from "../../src/worker/index.ts";
import { rig } from "./_more.ts";
import { cleanupKeys, cliEnv, readAll, redisFor, testSpace, waitUntil } from "./_support.ts";

const touch = (file: string) => ({
  content: [
    { type: "tool_use" as const, name: "Bash", input: { command: `touch ${file}`, description: "create a file" } },
  ],
});

test("supervised turns: operator allow runs the tool, deny refuses it, --always makes a rule the next turn uses", async () => {
  const space = testSpace();
  const cwd = space.workspace();
  const server = await startModelServer({
    script: {
      responses: [
        touch(join(cwd, "allowed.txt")),
        { content: [{ type: "text", text: "made it" }] },
        touch(join(cwd, "denied.txt")),
        { content: [{ type: "text", text: "was refused" }] },
        touch(join(cwd, "ruled.txt")),
        { content: [{ type: "text", text: "rule applied" }] },
        touch(join(cwd, "ruled-again.txt")),
        { content: [{ type: "text", text: "no one was asked" }] },
      ],
    },
  });
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const worker = startTurnWorker({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    workspaceRoots: [cwd],
    instanceRoot: space.dir("inst"),
    runEnv: cliEnv(server.url),
    operatorKeys: [OPERATOR.publicKey],
  });
  const nextPending = async (session: string): Promise<PendingRequest> => {
    let found: PendingRequest | undefined;
    await waitUntil(
      async () => {
        found = (await listPending({ redis, prefix: space.logPrefix })).find(
          (p) => p.session === session && p.status === "pending",
        );
        return found !== undefined;
      },
      30_000,
      "a pending decision",
    );
    return found!;
  };
  try {
    // Pre-approving Bash would let it through whenever the hook fails: the worker drops it.
    const allowedTurn = await producer.enqueueTurn({
      prompt: "make allowed.txt",
      cwd,
      options: { supervised: true, allowedTools: ["Bash"] },
    });
    const p1 = await nextPending(allowedTurn.session);
    assert.equal(p1.tool, "Bash");
    assert.equal(existsSync(join(cwd, "allowed.txt")), false, "nothing runs before the decision");
    await decide(
      { log: producer.log, redis, operatorKey },
      { session: allowedTurn.session, requestId: p1.requestId, decision: "allow", by: "erin", reason: "fine" },
    );
    const r1 = await producer.waitForTurn(allowedTurn.turn, { timeoutMs: 60_000 });
    assert.equal(r1.status, "finished", JSON.stringify(r1.event.data));
    assert.ok(existsSync(join(cwd, "allowed.txt")), "allowed call ran");

    const deniedTurn = await producer.enqueueTurn({
      session: allowedTurn.session,
      prompt: "make denied.txt",
      cwd,
      options: { supervised: true },
    });
    const p2 = await nextPending(allowedTurn.session);
    await decide(
      { log: producer.log, redis, operatorKey },
      { session: allowedTurn.session, requestId: p2.requestId, decision: "deny", by: "erin", reason: "not today" },
    );
    const r2 = await producer.waitForTurn(deniedTurn.turn, { timeoutMs: 60_000 });
    assert.equal(r2.status, "finished");
    assert.equal(existsSync(join(cwd, "denied.txt")), false, "denied call did not run");
    const events = await readAll(producer.log, allowedTurn.session);
    const result2 = events
      .filter((e) => e.turn === deniedTurn.turn && e.kind === "cli.line")
      .map((e) => JSON.parse((e.data as { raw: string }).raw))
      .find((l) => l.type === "result");
    assert.equal(result2.permission_denials.length, 1, "the CLI lists the denial");

    const ruledTurn = await producer.enqueueTurn({
      session: allowedTurn.session,
      prompt: "make ruled.txt",
      cwd,
      options: { supervised: true },
    });
    const p3 = await nextPending(allowedTurn.session);
    await decide(
      { log: producer.log, redis, operatorKey },
      {
        session: allowedTurn.session,
        requestId: p3.requestId,
        decision: "allow",
        by: "erin",
        always: true,
        rule: "Bash(touch *)",
      },
    );
    assert.equal((await producer.waitForTurn(ruledTurn.turn, { timeoutMs: 60_000 })).status, "finished");
    assert.ok(existsSync(join(cwd, "ruled.txt")));
    const ruledAgainTurn = await producer.enqueueTurn({
      session: allowedTurn.session,
      prompt: "make ruled-again.txt",
      cwd,
      options: { supervised: true },
    });
    assert.equal((await producer.waitForTurn(ruledAgainTurn.turn, { timeoutMs: 60_000 })).status, "finished");
    assert.ok(existsSync(join(cwd, "ruled-again.txt")), "the rule allowed the next turn's call");
    const all = await readAll(producer.log, allowedTurn.session);
    const ruled = all.find((e) => e.turn === ruledAgainTurn.turn && e.kind === "decision.made");
    assert.match(String((ruled?.data as { by?: unknown }).by), /^rule:/, "decided by the rule, without an operator");
    const kinds = all.map((e) => e.kind);
    assert.equal(kinds.filter((k) => k === "decision.requested").length, 4);
    assert.equal(kinds.filter((k) => k === "decision.made").length, 4);
    assert.equal(kinds.filter((k) => k === "rule.added").length, 1);
  } finally {
    await worker.close({ graceMs: 1000 });
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    await server.close();
    space.cleanup();
  }
});

test("a supervised turn cannot also skip permissions: refused at enqueue, naming the field", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  try {
    await assert.rejects(
      producer.enqueueTurn({
        prompt: "x",
        cwd: space.workspace(),
        options: { supervised: true, skipPermissions: true },
      }),
      (err: unknown) => err instanceof InvalidTurnError && /options\.skipPermissions/.test(err.message),
    );
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

const toolCall = (name: string, input: Record<string, unknown>) => ({
  content: [{ type: "tool_use" as const, name, input }],
});
const reply = (text: string) => ({ content: [{ type: "text" as const, text }] });

test("job options cannot take a risky tool out of supervision: riskyTools adds, smuggled pre-approvals of Bash, Monitor and MCP are dropped", async () => {
  const stage = await rig((ws: string) => ({
    responses: [
      touch(join(ws, "narrowed.txt")),
      reply("one"),
      touch(join(ws, "smuggled.txt")),
      reply("two"),
      toolCall("Monitor", { description: "watch", timeout_ms: 5000, command: `touch ${join(ws, "monitor.txt")}` }),
      reply("three"),
      toolCall("mcp__probe__touch", { path: join(ws, "mcp.txt") }),
      reply("four"),
    ],
  }));
  const mcpConfigFile = join(stage.space.dir("mcp"), "mcp.json");
  writeFileSync(
    mcpConfigFile,
    JSON.stringify({ mcpServers: { probe: { command: process.execPath, args: [MCP_PROBE] } } }),
  );
  stage.worker({ operatorKeys: [OPERATOR.publicKey], mcpConfigFile });
  try {
    const cases: Array<[string, Record<string, unknown>, string, string]> = [
      // Before: riskyTools replaced the defaults, so ["Read"] left Bash unsupervised (and pre-approved).
      ["narrowed.txt", { riskyTools: ["Read"], allowedTools: ["Bash"] }, "Bash", "make narrowed.txt"],
      // The CLI splits an allowedTools entry on commas and blanks.
      ["smuggled.txt", { allowedTools: ["Read,Bash(touch:*)"] }, "Bash", "make smuggled.txt"],
      ["monitor.txt", { riskyTools: ["Write"], allowedTools: ["Monitor"] }, "Monitor", "watch"],
      ["mcp.txt", { allowedTools: ["mcp__probe"] }, "mcp__probe__touch", "use the probe"],
    ];
    for (const [file, options, tool, prompt] of cases) {
      const queued = await stage.producer.enqueueTurn({
        prompt,
        cwd: stage.ws,
        options: { supervised: true, ...options },
      });
      const pending = await pendingFor(stage.redis, stage.space.logPrefix, queued.session);
      assert.equal(pending.tool, tool, file);
      await decide(
        { log: stage.producer.log, redis: stage.redis, operatorKey },
        { session: queued.session, requestId: pending.requestId, decision: "deny", by: "erin", reason: "checked" },
      );
      assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 })).status, "finished", file);
      assert.equal(existsSync(join(stage.ws, file)), false, `${file}: the denied call did not run`);
    }
  } finally {
    await stage.dispose();
  }
});

test("unsupervisedTools is the explicit way to narrow supervision, and leaving Bash out is logged", async () => {
  const stage = await rig((ws: string) => ({ responses: [touch(join(ws, "unsupervised.txt")), reply("done")] }));
  const warned: string[] = [];
  const logger = { debug() {}, info() {}, error() {}, warn: (_o: object, msg?: string) => void warned.push(msg ?? "") };
  stage.worker({ operatorKeys: [OPERATOR.publicKey], logger });
  try {
    await assert.rejects(
      stage.producer.enqueueTurn({
        prompt: "x",
        cwd: stage.ws,
        options: { supervised: true, riskyTools: ["Bash"], unsupervisedTools: ["Bash"] },
      }),
      (err: unknown) => err instanceof InvalidTurnError && /unsupervisedTools/.test(err.message),
    );
    const queued = await stage.producer.enqueueTurn({
      prompt: "make it",
      cwd: stage.ws,
      options: { supervised: true, unsupervisedTools: ["Bash"], allowedTools: ["Bash"] },
    });
    assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 })).status, "finished");
    assert.ok(existsSync(join(stage.ws, "unsupervised.txt")), "the unsupervised, pre-approved Bash call ran");
    assert.deepEqual(
      (await stage.events(queued.session)).filter((e) => e.kind === "decision.requested"),
      [],
      "nobody was asked",
    );
    assert.ok(
      warned.some((m) => /a shell tool is NOT supervised/.test(m)),
      "leaving Bash out was logged",
    );
  } finally {
    await stage.dispose();
  }
});

test("a worker without operator keys fails supervised turns, naming TURNSTREAM_OPERATOR_KEYS", async () => {
  const stage = await rig({ responses: [] });
  stage.worker();
  try {
    const queued = await stage.producer.enqueueTurn({ prompt: "x", cwd: stage.ws, options: { supervised: true } });
    const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(result.status, "failed");
    assert.match(JSON.stringify(result.event.data), /SupervisedUnavailable.*TURNSTREAM_OPERATOR_KEYS/);
  } finally {
    await stage.dispose();
  }
});

async function pendingFor(
  redis: ReturnType<typeof redisFor>,
  prefix: string,
  session: string,
): Promise<PendingRequest> {
  let found: PendingRequest | undefined;
  await waitUntil(
    async () => {
      found = (await listPending({ redis, prefix })).find((p) => p.session === session && p.status === "pending");
      return found !== undefined;
    },
    30_000,
    "a pending decision",
  );
  return found!;
}

test("TURNSTREAM_OPERATOR_KEYS: a key file or the keys inline; a bad key stops the worker's start, naming the variable", () => {
  const space = testSpace();
  try {
    const base = { TURNSTREAM_WORKSPACE_ROOTS: space.root };
    const file = join(space.dir("keys"), "operators.pub");
    writeFileSync(file, `# the on-call operators\n${OPERATOR.publicKey} erin\n`);
    assert.equal(workerConfigFromEnv(base).operatorKeys, undefined);
    assert.deepEqual(
      workerConfigFromEnv({ ...base, TURNSTREAM_OPERATOR_KEYS: file }).operatorKeys?.filter((l) =>
        l.startsWith("ed25519:"),
      ),
      [`${OPERATOR.publicKey} erin`],
    );
    assert.deepEqual(workerConfigFromEnv({ ...base, TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey }).operatorKeys, [
      OPERATOR.publicKey,
    ]);
    assert.throws(
      () => workerConfigFromEnv({ ...base, TURNSTREAM_OPERATOR_KEYS: "ssh-ed25519 AAAA" }),
      (e: unknown) => e instanceof WorkerConfigError && e.variable === "TURNSTREAM_OPERATOR_KEYS",
    );
    assert.throws(
      () => workerConfigFromEnv({ ...base, TURNSTREAM_OPERATOR_KEYS: join(space.root, "missing.pub") }),
      /TURNSTREAM_OPERATOR_KEYS.*cannot be read/,
    );
  } finally {
    space.cleanup();
  }
});
