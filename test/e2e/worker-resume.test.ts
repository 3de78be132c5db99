// Two turns of one session on two worker processes with different config roots: the second worker
// never saw turn 1, restores the CLI session from the snapshot in the log and resumes it. Also on a
// local Redis Cluster.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createProducer } from "../../src/queue/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startRedisCluster } from "../support/redis-cluster.ts";
import { cleanupKeys, cliEnv, readAll, redisFor, startWorkerProcess, testSpace } from "../worker/_support.ts";

async function resumeAcrossWorkers(redisEnv: Record<string, string>, clusterNodes?: string): Promise<void> {
  const space = testSpace();
  const server = await startModelServer({
    script: { responses: [{ content: [{ type: "text", text: "noted" }] }, { content: [{ type: "text", text: "the word was kumquat" }] }] },
  });
  const redis = redisFor(redisEnv["REDIS_URL"], clusterNodes);
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const ws = space.workspace();
  const env = (name: string): Record<string, string> => ({
    ...redisEnv,
    ...cliEnv(server.url),
    TURNSTREAM_WORKSPACE_ROOTS: ws,
    TURNSTREAM_PREFIX: space.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
    TURNSTREAM_INSTANCE_ROOT: space.dir(`root-${name}`),
    TURNSTREAM_INSTANCE_ID: `inst-${name}`,
  });
  try {
    const a = await startWorkerProcess(env("a"));
    const t1 = await producer.enqueueTurn({ prompt: "remember the word kumquat-marker", cwd: ws });
    const r1 = await producer.waitForTurn(t1.turn, { timeoutMs: 60000 });
    assert.equal(r1.status, "finished", JSON.stringify(r1.event.data));
    a.kill("SIGTERM");
    assert.equal((await a.exited).code, 0);

    const b = await startWorkerProcess(env("b"));
    try {
      const t2 = await producer.enqueueTurn({ session: t1.session, prompt: "which word?", cwd: ws });
      const r2 = await producer.waitForTurn(t2.turn, { timeoutMs: 60000 });
      assert.equal(r2.status, "finished", JSON.stringify(r2.event.data));
      assert.equal(r2.resultText, "the word was kumquat");
      assert.equal(r2.cliSessionId, r1.cliSessionId, "the CLI session was resumed, not replaced");
      const msgs = server.requests().filter((r) => r.kind === "messages");
      assert.ok(JSON.stringify(msgs.at(-1)!.messages).includes("kumquat-marker"), "turn 2's request carries turn 1's conversation");
      const events = await readAll(producer.log, t1.session);
      const started = events.filter((e) => e.kind === "attempt.started").map((e) => e.data as Record<string, unknown>);
      assert.equal(started.length, 2);
      assert.notEqual(started[0]!["worker"], started[1]!["worker"], "the turns ran on different workers");
      assert.equal(started[1]!["resume"], r1.cliSessionId);
      assert.equal(typeof started[1]!["snapshotSeq"], "number");
    } finally {
      b.kill("SIGTERM");
      await b.exited;
    }
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    await server.close();
    space.cleanup();
  }
}

test("two worker processes, different config roots: turn 2 resumes turn 1's CLI session (single Redis)", async () => {
  await resumeAcrossWorkers({ REDIS_URL: "redis://127.0.0.1:6379" });
});

test("two worker processes resume across workers on a local Redis Cluster", async () => {
  const cluster = await startRedisCluster();
  try {
    await resumeAcrossWorkers({ REDIS_CLUSTER_NODES: cluster.nodeList }, cluster.nodeList);
  } finally {
    await cluster.dispose();
  }
});
