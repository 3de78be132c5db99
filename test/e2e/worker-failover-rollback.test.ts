// A Redis failover that loses acknowledged writes, made the way asynchronous replication makes it:
// a primary and a replica on loopback, the replica cut off (promoted: a partition), the primary
// acknowledging the turn's appends for a while longer, then killed -9, and the clients' address (a
// proxy, as a virtual IP would be) sent to the promoted replica. The attempt writing the turn must not
// go on after the rolled-back head: it is recorded abandoned (log_rolled_back) and the turn runs
// again, and the log the turn ends in has every seq once, with each tool call and its result paired.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { connectRedis, createEventLog } from "../../src/log/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startRedisServer } from "../support/redis-server.ts";
import { startTcpProxy } from "../support/tcp-proxy.ts";
import {
  assertNoHole,
  cliEnv,
  readAll,
  testSpace,
  toolChain,
  toolResultCount,
  waitForToolResults,
  waitUntil,
} from "../worker/_support.ts";

const STEPS = 12;

async function replicaInSync(replica: Redis): Promise<boolean> {
  return (await replica.info("replication")).includes("master_link_status:up");
}

test(
  "a failover that lost acknowledged appends: the attempt is abandoned (log_rolled_back), the turn runs again, no hole",
  { timeout: 240_000 },
  async (t0) => {
    const space = testSpace();
    const primary = await startRedisServer();
    const replicaServer = await startRedisServer({ args: ["--replicaof", "127.0.0.1", String(primary.port)] });
    const proxy = await startTcpProxy(primary.port);
    const onPrimary = new Redis(primary.url, { maxRetriesPerRequest: 1 });
    const onReplica = new Redis(replicaServer.url);
    for (const connection of [onPrimary, onReplica]) connection.on("error", () => undefined);
    const server = await startModelServer({
      script: { responses: Array.from({ length: 3 }, () => toolChain("CHAIN", STEPS, { pauseS: 0.3 })).flat() },
    });
    const redis = connectRedis({ url: proxy.url });
    redis.on("error", () => undefined);
    const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
    const primaryLog = createEventLog({ redis: onPrimary, prefix: space.logPrefix });
    const replicaLog = createEventLog({ redis: onReplica, prefix: space.logPrefix });
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
      await waitUntil(() => replicaInSync(onReplica), 15000, "the replica in sync with the primary");
      const queued = await producer.enqueueTurn({
        prompt: "CHAIN-START: run the steps",
        cwd: ws,
        options: { skipPermissions: true },
      });
      await waitForToolResults(primaryLog, queued.session, 3, "primary");

      // The partition: the replica stops taking the primary's writes (and is promoted).
      await onReplica.replicaof("NO", "ONE");
      const cut = await replicaLog.stat(queued.session);
      const resultsAtCut = await toolResultCount(replicaLog, queued.session);
      // The primary goes on acknowledging the attempt's appends, which the replica never gets.
      // Three more acknowledged by the primary.
      await waitForToolResults(primaryLog, queued.session, resultsAtCut + 3, "primary");
      const lost = await primaryLog.stat(queued.session);
      await primary.stop("SIGKILL");
      proxy.switchTo(replicaServer.port);
      assert.ok(
        lost.lastSeq > cut.lastSeq,
        `the primary acknowledged seq ${lost.lastSeq}, the promoted replica holds ${cut.lastSeq}`,
      );
      t0.diagnostic(
        `acknowledged events lost in the failover: ${lost.lastSeq - cut.lastSeq} (seq ${cut.lastSeq + 1}..${lost.lastSeq})`,
      );

      await waitUntil(
        async () => {
          const st = await replicaLog.stat(queued.session);
          return st.turn === queued.turn && (st.state === "finished" || st.state === "failed");
        },
        150000,
        "the turn to end on the promoted replica",
      );
      const events = await readAll(replicaLog, queued.session);
      const abandoned = events
        .filter((e) => e.kind === "attempt.abandoned")
        .map((e) => e.data as { reason: string; attempt: number; detectedBy?: number });
      const rolledBack = abandoned.find((a) => a.reason === "log_rolled_back");
      assert.ok(rolledBack !== undefined, `attempt.abandoned (log_rolled_back) in ${JSON.stringify(abandoned)}`);
      assert.equal(rolledBack.attempt, 1);
      const abandonedAt = events.find(
        (e) => e.kind === "attempt.abandoned" && (e.data as { reason: string }).reason === "log_rolled_back",
      )!.seq;
      assert.ok(
        events.filter((e) => e.attempt === 1).every((e) => e.seq < abandonedAt),
        "the rolled-back attempt wrote nothing after the log's real head",
      );
      const end = assertNoHole(events, queued.turn, STEPS);
      assert.equal(end, events.at(-1), "the turn's end is the log's last event");
      if (end.kind === "turn.failed") {
        assert.equal((end.data as { errorKind: string }).errorKind, "log_lost", JSON.stringify(end.data));
        return;
      }
      const accepted = (end.data as { attempt: number }).attempt;
      assert.ok(
        accepted >= 2,
        `the turn finished on a later attempt (${accepted}), not on the one that wrote after a hole`,
      );
      const result = await producer.waitForTurn(queued.turn, { timeoutMs: 30000 });
      assert.equal(result.status, "finished");
      assert.equal(result.resultText, "CHAIN done");
    } finally {
      await worker.close({ graceMs: 1000 });
      await producer.close();
      redis.disconnect();
      onPrimary.disconnect();
      onReplica.disconnect();
      await proxy.close();
      await server.close();
      await primary.dispose();
      await replicaServer.dispose();
      space.cleanup();
    }
  },
);
