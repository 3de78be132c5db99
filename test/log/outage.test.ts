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

async function readAll(log: EventLog, s: string): Promise<{ seq: number; i: number; epoch: number }[]> {
  const out: { seq: number; i: number; epoch: number }[] = [];
  for await (const e of log.read(s))
    out.push({ seq: e.seq, i: JSON.parse((e.data as { raw: string }).raw).i, epoch: e.epoch });
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

  it("Redis killed mid-stream for 5 s and restarted: zero events lost or duplicated", async (t) => {
    const s = `s-${rid()}`;
    const N = 1500;
    const { epoch, attempt } = await log.beginAttempt(s, "t1");
    let killedAt = 0;
    let retries = 0;
    let signalKilled!: () => void;
    const killed = new Promise<void>((resolve) => (signalKilled = resolve));
    const writer = createWriter({
      log,
      session: s,
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
      for (let i = 0; i < N; i++) {
        const t = Date.now();
        await writer.write({
          turn: "t1",
          attempt,
          kind: "cli.line",
          data: { raw: JSON.stringify({ type: "assistant", i }) },
        });
        longestWrite = Math.max(longestWrite, Date.now() - t);
      }
      return writer.close();
    })();
    // Wait for the kill to have happened, then keep Redis down for the 5 s the outage lasts.
    await killed;
    await delay(5000);
    await server.start();
    const lastSeq = await producer;

    assert.equal(lastSeq, N);
    const evs = await readAll(log, s);
    assert.equal(evs.length, N);
    evs.forEach((e, idx) => {
      assert.equal(e.seq, idx + 1);
      assert.equal(e.i, idx, `event ${idx + 1} carries payload ${idx}`);
      assert.equal(e.epoch, epoch);
    });
    assert.ok(retries > 0, "the writer had to retry");
    t.diagnostic(
      `writer retries ${retries}, duplicates detected ${writer.stats.duplicates}, batches ${writer.stats.batches}`,
    );
    assert.ok(longestWrite >= 4000, `the producer was held back during the outage (longest write ${longestWrite} ms)`);
    const st = await log.stat(s);
    assert.equal(st.lastSeq, N);
    assert.equal(st.length, N);
  });

  it("Redis frozen (SIGSTOP) for 2 s: the producer blocks, nothing is lost or doubled", async () => {
    const s = `s-${rid()}`;
    const N = 800;
    const { epoch, attempt } = await log.beginAttempt(s, "t1");
    let paused = false;
    let resumed: Promise<void> | undefined;
    const writer = createWriter({
      log,
      session: s,
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
    for (let i = 0; i < N; i++) {
      const t = Date.now();
      await writer.write({ turn: "t1", attempt, kind: "cli.line", data: { raw: JSON.stringify({ i }) } });
      longestWrite = Math.max(longestWrite, Date.now() - t);
    }
    assert.equal(await writer.close(), N);
    await resumed;
    const evs = await readAll(log, s);
    assert.deepEqual(
      evs.map((e) => e.i),
      Array.from({ length: N }, (_, i) => i),
    );
    assert.ok(longestWrite >= 1500, `producer blocked while Redis was frozen (${longestWrite} ms)`);
    assert.ok(writer.pending === 0);
  });

  it("scripts survive SCRIPT FLUSH and a restart (EVALSHA → NOSCRIPT → EVAL)", async () => {
    const s = `s-${rid()}`;
    const { epoch, attempt } = await log.beginAttempt(s, "t1");
    const ev = { turn: "t1", attempt, kind: "cli.line", data: { raw: "a" } };
    await log.append(s, epoch, [ev]);
    await redis.script("FLUSH");
    assert.equal((await log.append(s, epoch, [ev])).outcome, "appended");
    await server.stop("SIGTERM");
    await server.start();
    assert.equal((await log.append(s, epoch, [ev])).outcome, "appended");
    assert.equal((await log.beginAttempt(s, "t1")).epoch, epoch + 1);
    assert.equal((await log.stat(s)).lastSeq, 3, "appends before the restart survived it (AOF)");
  });
});
