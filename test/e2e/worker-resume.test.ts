// Two turns of one session on two worker processes with different config roots: the second worker
// never saw turn 1, restores the CLI session from the snapshot in the log and resumes it. Also on a
// local Redis Cluster.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startRedisCluster } from "../support/redis-cluster.ts";
import { processFleet, readAll } from "../worker/_support.ts";

async function resumeAcrossWorkers(redis: { redisUrl?: string; clusterNodes?: string }): Promise<void> {
  const fleet = await processFleet(
    {
      responses: [
        { content: [{ type: "text", text: "noted" }] },
        { content: [{ type: "text", text: "the word was kumquat" }] },
      ],
    },
    redis,
  );
  const { server, producer, ws } = fleet;
  const start = (name: string) => fleet.start(name, { TURNSTREAM_INSTANCE_ID: `inst-${name}` });
  try {
    const workerA = await start("a");
    const t1 = await producer.enqueueTurn({ prompt: "remember the word kumquat-marker", cwd: ws });
    const r1 = await producer.waitForTurn(t1.turn, { timeoutMs: 60000 });
    assert.equal(r1.status, "finished", JSON.stringify(r1.event.data));
    workerA.kill("SIGTERM");
    assert.equal((await workerA.exited).code, 0);

    await start("b");
    const t2 = await producer.enqueueTurn({ session: t1.session, prompt: "which word?", cwd: ws });
    const r2 = await producer.waitForTurn(t2.turn, { timeoutMs: 60000 });
    assert.equal(r2.status, "finished", JSON.stringify(r2.event.data));
    assert.equal(r2.resultText, "the word was kumquat");
    assert.equal(r2.cliSessionId, r1.cliSessionId, "the CLI session was resumed, not replaced");
    const msgs = server.requests().filter((r) => r.kind === "messages");
    assert.ok(
      JSON.stringify(msgs.at(-1)!.messages).includes("kumquat-marker"),
      "turn 2's request carries turn 1's conversation",
    );
    const events = await readAll(producer.log, t1.session);
    const started = events.filter((e) => e.kind === "attempt.started").map((e) => e.data as Record<string, unknown>);
    assert.equal(started.length, 2);
    assert.notEqual(started[0]!["worker"], started[1]!["worker"], "the turns ran on different workers");
    assert.equal(started[1]!["resume"], r1.cliSessionId);
    assert.equal(typeof started[1]!["snapshotSeq"], "number");
  } finally {
    await fleet.dispose();
  }
}

test("two worker processes, different config roots: turn 2 resumes turn 1's CLI session (single Redis)", async () => {
  await resumeAcrossWorkers({ redisUrl: "redis://127.0.0.1:6379" });
});

test("two worker processes resume across workers on a local Redis Cluster", async () => {
  const cluster = await startRedisCluster();
  try {
    await resumeAcrossWorkers({ clusterNodes: cluster.nodeList });
  } finally {
    await cluster.dispose();
  }
});
