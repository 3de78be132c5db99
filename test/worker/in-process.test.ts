// The in-process worker against the real CLI: one session's turns run in order and the second resumes
// the first's CLI session from the snapshot in the log; each attempt.started names the CLI's version.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createProducer } from "../../src/queue/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { dataOf } from "../../src/events/index.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cleanupKeys, cliEnv, readAll, redisFor, testSpace, waitUntil } from "./_support.ts";

test("in-process worker: two turns of one session, the second resumes the first", async () => {
  const space = testSpace();
  const server = await startModelServer({
    script: {
      responses: [{ content: [{ type: "text", text: "noted" }] }, { content: [{ type: "text", text: "it was 42" }] }],
    },
  });
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const worker = startTurnWorker({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    workspaceRoots: [space.workspace()],
    instanceRoot: space.dir("inst"),
    runEnv: cliEnv(server.url),
    concurrency: 2,
  });
  try {
    const cwd = space.workspace();
    const firstTurn = await producer.enqueueTurn({ prompt: "remember {{n}}-marker", variables: { n: 42 }, cwd });
    const secondTurn = await producer.enqueueTurn({ session: firstTurn.session, prompt: "which number?", cwd });
    const seen: string[] = [];
    const r1 = await producer.waitForTurn(firstTurn.turn, { timeoutMs: 60000, onEvent: (e) => seen.push(e.kind) });
    const r2 = await producer.waitForTurn(secondTurn.turn, { timeoutMs: 60000 });
    assert.equal(r1.status, "finished", JSON.stringify(r1.event.data));
    assert.equal(r2.status, "finished", JSON.stringify(r2.event.data));
    assert.equal(r1.resultText, "noted");
    assert.equal(r2.resultText, "it was 42");
    assert.equal(r2.cliSessionId, r1.cliSessionId);
    assert.ok(
      seen.includes("attempt.started") && seen.includes("cli.line") && seen.includes("session.snapshot"),
      seen.join(","),
    );
    const reqs = server.requests().filter((r) => r.kind === "messages");
    assert.ok(JSON.stringify(reqs.at(-1)!.messages).includes("remember 42-marker"));
    const events = await readAll(producer.log, firstTurn.session);
    const kinds = events.map((e) => `${e.turn === firstTurn.turn ? 1 : 2}:${e.kind}`);
    assert.ok(kinds.indexOf("2:attempt.started") > kinds.indexOf("1:turn.finished"), kinds.join(" "));
    // Every attempt records the version of the CLI that ran it: the pinned package's, read once by the worker.
    const pinned = (
      JSON.parse(readFileSync(join("node_modules", "@anthropic-ai", "claude-code", "package.json"), "utf8")) as {
        version: string;
      }
    ).version;
    const starts = events
      .filter((e) => e.kind === "attempt.started")
      .map((e) => dataOf("attempt.started", e.data)?.cliVersion);
    assert.deepEqual(starts, [pinned, pinned]);
    const init = events
      .map((event) =>
        event.kind === "cli.line"
          ? (JSON.parse(String(dataOf("cli.line", event.data)?.raw)) as Record<string, unknown>)
          : undefined,
      )
      .find((l) => l?.["subtype"] === "init");
    assert.equal(init?.["claude_code_version"], pinned, "the version the CLI itself reports");
    // The worker pops the turn right after its terminal event is in the log.
    await waitUntil(
      async () => (await producer.order.pending(firstTurn.session)).length === 0,
      5000,
      "the session's pending list to empty",
    );
  } finally {
    await worker.close({ graceMs: 1000 });
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    await server.close();
    space.cleanup();
  }
});
