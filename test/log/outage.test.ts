// The writer across real Redis outages, on a private redis-server.
//
// What a real outage looks like: (1) the Redis process dies and comes back (crash, OOM kill, deploy).
// In-flight commands may have executed with their reply lost, the client reconnects and re-sends
// them (ioredis does by default) or fails them and our writer retries: the batch id must turn every
// such re-send into `duplicate`. A restarted Redis keeps acknowledged writes only with persistence,
// so the server runs with --appendonly yes --appendfsync always (an acked append is on disk before
// the reply leaves); without persistence a restart loses data on the server side, which no client
// can repair. (2) Redis hangs or the network stalls (SIGSTOP): the TCP connection stays up, commands
// just wait; the writer must block its producer instead of buffering without bound.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import { connectRedis, createEventLog, createWriter, type EventLog, type RedisClient } from "../../src/log/index.ts";
import { startRedisServer, type RedisServer } from "../support/redis-server.ts";
import { rid } from "./contract.ts";

async function readAll(log: EventLog, sessionId: string): Promise<{ seq: number; i: number; epoch: number }[]> {
  const out: { seq: number; i: number; epoch: number }[] = [];
  for await (const event of log.read(sessionId))
    out.push({ seq: event.seq, i: JSON.parse((event.data as { raw: string }).raw).i, epoch: event.epoch });
  return out;
}

describe("writer across a Redis outage", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let log: EventLog;

  before(async () => {
    server = await startRedisServer({ args: ["--appendonly", "yes", "--appendfsync", "always"] });
    // Few per-command retries so both recovery paths run: ioredis re-sending after reconnect, and
    // ioredis giving up (MaxRetriesPerRequestError) so the writer's own backoff retries the batch.
    redis = connectRedis({ url: server.url, env: {}, redisOptions: { maxRetriesPerRequest: 3 } });
    redis.on("error", () => {});
    log = createEventLog({ redis, prefix: `test:${rid()}:` });
  });
  after(async () => {
    redis.disconnect();
    await server.dispose();
  });

  it("Redis killed mid-stream for 5 s and restarted: zero events lost or duplicated", async (context) => {
    const sessionId = `s-${rid()}`;
    const EVENTS = 1500;
    const { epoch, attempt } = await log.beginAttempt(sessionId, "t1");
    let killedAt = 0;
    let retries = 0;
    let signalKilled!: () => void;
    const killed = new Promise<void>((resolve) => (signalKilled = resolve));
    const writer = createWriter({
      log,
      session: sessionId,
      epoch,
      maxBatchEvents: 20,
      maxBufferEvents: 100,
      backoff: { initialMs: 50, maxMs: 1000 },
      onAppended: ({ lastSeq }) => {
        // Kill while batches are in flight and the producer is still writing.
        if (killedAt === 0 && lastSeq >= 300) {
          killedAt = Date.now();
          void server.stop("SIGKILL").then(signalKilled);
        }
      },
      onRetry: () => retries++,
    });
    let longestWrite = 0;
    const producer = (async () => {
      for (let index = 0; index < EVENTS; index++) {
        const startedAt = Date.now();
        await writer.write({
          turn: "t1",
          attempt,
          kind: "cli.line",
          data: { raw: JSON.stringify({ type: "assistant", i: index }) },
        });
        longestWrite = Math.max(longestWrite, Date.now() - startedAt);
      }
      return writer.close();
    })();
    // Wait for the kill to have happened, then keep Redis down for the 5 s the outage lasts.
    await killed;
    await delay(5000);
    await server.start();
    const lastSeq = await producer;

    assert.equal(lastSeq, EVENTS);
    const evs = await readAll(log, sessionId);
    assert.equal(evs.length, EVENTS);
    evs.forEach((event, idx) => {
      assert.equal(event.seq, idx + 1);
      assert.equal(event.i, idx, `event ${idx + 1} carries payload ${idx}`);
      assert.equal(event.epoch, epoch);
    });
    assert.ok(retries > 0, "the writer had to retry");
    context.diagnostic(
      `writer retries ${retries}, duplicates detected ${writer.stats.duplicates}, batches ${writer.stats.batches}`,
    );
    assert.ok(longestWrite >= 4000, `the producer was held back during the outage (longest write ${longestWrite} ms)`);
    const st = await log.stat(sessionId);
    assert.equal(st.lastSeq, EVENTS);
    assert.equal(st.length, EVENTS);
  });

  it("Redis frozen (SIGSTOP) for 2 s: the producer blocks, nothing is lost or doubled", async () => {
    const sessionId = `s-${rid()}`;
    const EVENTS = 800;
    const { epoch, attempt } = await log.beginAttempt(sessionId, "t1");
    let paused = false;
    let resumed: Promise<void> | undefined;
    const writer = createWriter({
      log,
      session: sessionId,
      epoch,
      maxBatchEvents: 20,
      maxBufferEvents: 50,
      onAppended: ({ lastSeq }) => {
        if (!paused && lastSeq >= 200) {
          paused = true;
          server.pause();
          resumed = delay(2000).then(() => server.resume());
        }
      },
    });
    let longestWrite = 0;
    for (let index = 0; index < EVENTS; index++) {
      const startedAt = Date.now();
      await writer.write({ turn: "t1", attempt, kind: "cli.line", data: { raw: JSON.stringify({ i: index }) } });
      longestWrite = Math.max(longestWrite, Date.now() - startedAt);
    }
    assert.equal(await writer.close(), EVENTS);
    await resumed;
    const evs = await readAll(log, sessionId);
    assert.deepEqual(
      evs.map((e) => e.i),
      Array.from({ length: EVENTS }, (_, i) => i),
    );
    assert.ok(longestWrite >= 1500, `producer blocked while Redis was frozen (${longestWrite} ms)`);
    assert.ok(writer.pending === 0);
  });

  it("scripts survive SCRIPT FLUSH and a restart (EVALSHA → NOSCRIPT → EVAL)", async () => {
    const sessionId = `s-${rid()}`;
    const { epoch, attempt } = await log.beginAttempt(sessionId, "t1");
    const ev = { turn: "t1", attempt, kind: "cli.line", data: { raw: "a" } };
    await log.append(sessionId, epoch, [ev]);
    await redis.script("FLUSH");
    assert.equal((await log.append(sessionId, epoch, [ev])).outcome, "appended");
    await server.stop("SIGTERM");
    await server.start();
    assert.equal((await log.append(sessionId, epoch, [ev])).outcome, "appended");
    assert.equal((await log.beginAttempt(sessionId, "t1")).epoch, epoch + 1);
    assert.equal((await log.stat(sessionId)).lastSeq, 3, "appends before the restart survived it (AOF)");
  });
});
