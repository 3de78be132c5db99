// A log that lost acknowledged writes, against the worker and the real CLI. The loss is made the way a
// failover makes it: the session's keys put back (DUMP … RESTORE REPLACE) to what a replica cut off at
// that moment would hold. (test/e2e/worker-failover-rollback.test.ts does it with a real replica.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { outcomeOfErrorKind } from "../../src/bin/exit-codes.ts";
import { connectRedis, type Envelope, type EventLog } from "../../src/log/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { cleanupKeys, cliEnv, readAll, testSpace, toolChain, waitUntil } from "./_support.ts";

function toolResultsOf(events: readonly Envelope[], turn: string): number {
  return events.filter(
    (e) =>
      e.turn === turn && e.kind === "cli.line" && String((e.data as { raw: string }).raw).includes('"tool_result"'),
  ).length;
}

async function ended(log: EventLog, session: string, turn: string): Promise<boolean> {
  const st = await log.stat(session);
  return st.turn === turn && (st.state === "finished" || st.state === "failed");
}

async function setup(responses: object[]) {
  const space = testSpace();
  const server = await startModelServer({ script: { responses } });
  const redis = connectRedis();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const ws = space.workspace();
  const startWorker = () =>
    startTurnWorker({
      redis,
      logPrefix: space.logPrefix,
      queuePrefix: space.queuePrefix,
      workspaceRoots: [ws],
      instanceRoot: space.dir("inst"),
      runEnv: cliEnv(server.url),
      sandboxed: true,
    });
  return { space, server, redis, producer, ws, startWorker };
}

test(
  "the log lost the snapshot a rolled-back attempt resumed from: the turn fails (log_lost, exit 3), saying so",
  { timeout: 180_000 },
  async () => {
    const { space, server, redis, producer, ws, startWorker } = await setup([
      ...toolChain("A", 2),
      ...toolChain("B", 8, { gatedStep: 3 }),
    ]);
    const worker = startWorker();
    try {
      const t1 = await producer.enqueueTurn({ prompt: "A-START", cwd: ws, options: { skipPermissions: true } });
      const t2 = await producer.enqueueTurn({
        session: t1.session,
        prompt: "B-START",
        cwd: ws,
        options: { skipPermissions: true },
      });
      const sessionKeys = producer.log.keys(t1.session);
      // What a replica cut off now holds: both turns queued, the first one running, no snapshot yet.
      await waitUntil(
        async () => toolResultsOf(await readAll(producer.log, t1.session), t1.turn) >= 1,
        60000,
        "turn 1's first tool result",
      );
      const saved = await Promise.all(
        [sessionKeys.events, sessionKeys.meta].map(async (key) => [key, await redis.dumpBuffer(key)] as const),
      );
      // The primary goes on: turn 1 finishes (its snapshot is written), turn 2 resumes from it.
      await waitUntil(
        async () => toolResultsOf(await readAll(producer.log, t1.session), t2.turn) >= 2,
        90000,
        "turn 2's second tool result",
      );
      const snapshotSeq = (await readAll(producer.log, t1.session)).find((e) => e.kind === "session.snapshot")?.seq;
      assert.ok(snapshotSeq !== undefined, "turn 1 left a snapshot");
      for (const [key, dump] of saved) await redis.restore(key, 0, dump!, "REPLACE");
      // Turn 2 waits at its third step until now, however slowly this machine polled.
      writeFileSync(join(ws, "gate"), "");

      await waitUntil(() => ended(producer.log, t1.session, t2.turn), 90000, "turn 2 to end");
      const events = await readAll(producer.log, t1.session);
      assert.deepEqual(
        events.map((e) => e.seq),
        events.map((_, i) => i + 1),
        "every seq once",
      );
      const abandoned = events.find((e) => e.kind === "attempt.abandoned" && e.turn === t2.turn)!;
      assert.deepEqual(abandoned.data, { reason: "log_rolled_back", attempt: 1, retry: false, detectedBy: 2 });
      const failed = events.at(-1)!;
      assert.equal(failed.kind, "turn.failed");
      const data = failed.data as { errorKind: string; error: { message: string }; retryable: boolean };
      assert.equal(data.errorKind, "log_lost");
      assert.match(
        data.error.message,
        new RegExp(`lost writes it had acknowledged.*snapshot at seq ${snapshotSeq} the turn resumes from is gone`),
      );
      assert.equal(outcomeOfErrorKind(data.errorKind), "infrastructure");
      assert.equal(
        events.filter((e) => e.turn === t2.turn && e.kind === "attempt.started").length,
        0,
        "no attempt ran on a log without its snapshot",
      );
    } finally {
      await worker.close({ graceMs: 1000 });
      await cleanupKeys(redis, space);
      await producer.close();
      redis.disconnect();
      await server.close();
      space.cleanup();
    }
  },
);

test(
  "the log lost the turn's own turn.queued before it ran: the turn fails (log_lost), nothing runs",
  { timeout: 60_000 },
  async () => {
    const { space, server, redis, producer, ws, startWorker } = await setup(toolChain("C", 1));
    const queued = await producer.enqueueTurn({ prompt: "C-START", cwd: ws, options: { skipPermissions: true } });
    const sessionKeys = producer.log.keys(queued.session);
    await redis.del(sessionKeys.events, sessionKeys.meta);
    const worker = startWorker();
    try {
      await waitUntil(() => ended(producer.log, queued.session, queued.turn), 30000, "the turn to end");
      const events = await readAll(producer.log, queued.session);
      assert.deepEqual(
        events.map((e) => e.kind),
        ["turn.failed"],
      );
      const data = events[0]!.data as { errorKind: string; error: { message: string } };
      assert.equal(data.errorKind, "log_lost");
      assert.match(data.error.message, new RegExp(`queued at seq ${queued.queuedSeq} but the log is at seq 0`));
      assert.equal(server.requests().length, 0, "the CLI never ran");
    } finally {
      await worker.close({ graceMs: 1000 });
      await cleanupKeys(redis, space);
      await producer.close();
      redis.disconnect();
      await server.close();
      space.cleanup();
    }
  },
);
