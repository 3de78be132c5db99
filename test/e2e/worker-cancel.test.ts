// Cancellation: a running turn's tree is killed and the turn recorded cancelled; a queued turn is
// cancelled before it runs; a malformed job that reaches a worker fails once, without retry.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { Job } from "bullmq";
import { createProducer } from "../../src/queue/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { cleanupKeys, cliEnv, readAll, redisFor, testSpace, treeMembers, waitUntil } from "../worker/_support.ts";

function markerOf(needle: string, root: string): string | undefined {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!readFileSync(`/proc/${name}/cmdline`, "latin1").replaceAll("\0", " ").includes(needle)) continue;
      const env = readFileSync(`/proc/${name}/environ`, "latin1");
      const match = /TURNSTREAM_TREE=([0-9a-f-]+)/.exec(env);
      if (match && env.includes(root)) return match[1];
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

test("cancelTurn: the running turn's tree is killed and recorded cancelled; the queued one never runs; the next turn runs", async () => {
  const space = testSpace();
  const server = await startModelServer({
    script: {
      responses: [
        {
          content: [
            {
              type: "tool_use",
              name: "Bash",
              input: { command: "echo begin; sleep 41; echo slept", description: "wait" },
            },
          ],
        },
        { content: [{ type: "text", text: "third turn ran" }] },
      ],
    },
  });
  const redis = redisFor();
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
    leaseMs: 1500,
  });
  try {
    const t1 = await producer.enqueueTurn({ prompt: "slow one", cwd: ws, options: { skipPermissions: true } });
    const t2 = await producer.enqueueTurn({ session: t1.session, prompt: "never runs", cwd: ws });
    const t3 = await producer.enqueueTurn({ session: t1.session, prompt: "runs after", cwd: ws });
    let marker: string | undefined;
    await waitUntil(() => (marker = markerOf("sleep 41", space.root)) !== undefined, 30000, "the Bash sleep");
    assert.equal((await producer.cancelTurn(t2.turn)).outcome, "cancelled");
    assert.equal((await producer.cancelTurn(t1.turn, { reason: "operator" })).outcome, "requested");
    const r1 = await producer.waitForTurn(t1.turn, { timeoutMs: 30000 });
    assert.equal(r1.status, "cancelled");
    await waitUntil(() => treeMembers(marker!).length === 0, 10000, "the cancelled turn's tree to be gone");
    const r2 = await producer.waitForTurn(t2.turn, { timeoutMs: 5000 });
    assert.equal(r2.status, "cancelled");
    const r3 = await producer.waitForTurn(t3.turn, { timeoutMs: 60000 });
    assert.equal(r3.status, "finished");
    assert.equal(r3.resultText, "third turn ran");
    const events = await readAll(producer.log, t1.session);
    const of = (t: string) => events.filter((e) => e.turn === t).map((e) => e.kind);
    assert.ok(of(t1.turn).includes("attempt.abandoned"));
    assert.equal(of(t1.turn).at(-1), "turn.cancelled");
    assert.deepEqual(of(t2.turn), ["turn.queued", "turn.cancelled"], "the queued turn never started");
    assert.equal((await producer.cancelTurn(t3.turn)).outcome, "too_late");
  } finally {
    await worker.close({ graceMs: 1000 });
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    await server.close();
    space.cleanup();
  }
});

test("a malformed job that reaches a worker fails once, without retry, and does not block its session", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const worker = startTurnWorker({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    workspaceRoots: [space.workspace()],
  });
  try {
    const session = `bad-${space.id}`;
    const turn = "t_malformedjob0001";
    await producer.order.register(session, turn);
    const failed = new Promise<Error>((resolve) => worker.worker.on("failed", (_job, err) => resolve(err)));
    await producer.queue.add("turn", { v: 1, session, turn, prompt: 42, cwd: "/tmp" }, { jobId: turn, attempts: 3 });
    const err = await failed;
    assert.match(err.message, /prompt/);
    const job = await Job.fromId(producer.queue, turn);
    assert.equal(await job!.getState(), "failed");
    assert.equal(job!.attemptsMade, 1, "no retry although the job allowed 3 attempts");
    const events = await readAll(producer.log, session);
    assert.deepEqual(
      events.map((e) => e.kind),
      ["turn.failed"],
    );
    assert.equal((events[0]!.data as Record<string, unknown>)["errorKind"], "bad_payload");
    assert.deepEqual(await producer.order.pending(session), []);
  } finally {
    await worker.close({ graceMs: 1000 });
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
