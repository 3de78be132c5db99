// Redis (a private redis-server with appendonly) restarted while a turn runs: the writer retries
// through the outage, the lease and the job lock survive in the AOF, and the turn completes with
// every line in the log.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connectRedis } from "../../src/log/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startRedisServer } from "../support/redis-server.ts";
import { cliEnv, readAll, testSpace, waitUntil } from "../worker/_support.ts";

test("Redis restarted mid-turn: the turn completes and nothing is lost", async () => {
  const space = testSpace();
  const redisServer = await startRedisServer({ args: ["--appendonly", "yes", "--appendfsync", "always"] });
  const server = await startModelServer({
    script: {
      responses: [
        {
          content: [
            {
              type: "tool_use",
              name: "Bash",
              input: { command: "echo begin; sleep 3; echo after-restart-marker", description: "wait" },
            },
          ],
        },
        { content: [{ type: "text", text: "all good" }] },
      ],
    },
  });
  const redis = connectRedis({ url: redisServer.url });
  redis.on("error", () => undefined);
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const ws = space.workspace();
  const worker = startTurnWorker({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    workspaceRoots: [ws],
    instanceRoot: space.dir("inst"),
    runEnv: cliEnv(server.url),
    sandboxed: true,
  });
  try {
    const queued = await producer.enqueueTurn({ prompt: "run it", cwd: ws, options: { skipPermissions: true } });
    // Restart once the CLI has asked for the tool, i.e. while the Bash command runs.
    await waitUntil(
      async () =>
        (await readAll(producer.log, queued.session)).some(
          (e) => e.kind === "cli.line" && String((e.data as { raw: string }).raw).includes('"tool_use"'),
        ),
      30000,
      "the Bash tool call in the log",
    );
    await redisServer.stop("SIGTERM");
    await redisServer.start();
    const result = await producer.waitForTurn(queued.turn, { timeoutMs: 60000 });
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    assert.equal(result.attempt, 1, "the attempt survived the restart");
    assert.equal(result.resultText, "all good");
    const events = await readAll(producer.log, queued.session);
    assert.deepEqual(
      events.map((e) => e.seq),
      events.map((_, i) => i + 1),
      "no gap in the log",
    );
    const lines = events.filter((e) => e.kind === "cli.line").map((e) => String((e.data as { raw: string }).raw));
    assert.equal(new Set(lines).size, lines.length, "no line twice");
    assert.ok(
      lines.some((l) => l.includes("after-restart-marker")),
      "the tool output written after the restart is there",
    );
    const types = lines.map((l) => (JSON.parse(l) as { type: string }).type);
    assert.equal(types[0], "system");
    assert.equal(types.at(-1), "result");
    assert.deepEqual(
      events
        .filter((e) => e.kind !== "cli.line" && e.kind !== "cli.stderr" && e.kind !== "model.call")
        .map((e) => e.kind),
      ["turn.queued", "attempt.started", "cli.exit", "session.snapshot", "turn.finished"],
    );
    // Each model call the gateway saw is in the log once, the outage notwithstanding.
    const messages = server.requests().filter((q) => q.kind === "messages").length;
    assert.equal(
      events.filter((e) => e.kind === "model.call" && (e.data as { path?: string }).path === "/v1/messages").length,
      messages,
    );
    assert.equal(events.filter((e) => e.kind === "attempt.started").length, 1);
  } finally {
    await worker.close({ graceMs: 1000 });
    await producer.close();
    redis.disconnect();
    await server.close();
    await redisServer.dispose();
    space.cleanup();
  }
});
