// append.lua's rollback check against a real Redis. A rollback is made the way a failover makes one:
// the session's keys are put back (DUMP … RESTORE REPLACE) to what they held earlier, as a replica
// that had not received the later writes would hold them.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  connectRedis,
  createEventLog,
  createWriter,
  FencedError,
  LogRolledBackError,
  type EventLog,
  type RedisClient,
} from "../../src/log/index.ts";
import { rid } from "./contract.ts";

const line = (raw: string, attempt = 1) => ({ turn: "t1", attempt, kind: "cli.line", data: { raw } });
const queued = (turn: string) => ({
  turn,
  attempt: 0,
  kind: "turn.queued",
  data: { prompt: "p", cwd: "/tmp", options: {} },
});

type Saved = [key: string, dump: Buffer | null][];

describe("append.lua: a log behind what a writer was acknowledged is refused (rolled_back)", () => {
  let redis: RedisClient;
  let log: EventLog;
  const prefix = `test:${rid()}:`;
  const sessions: string[] = [];
  const session = (): string => {
    const sessionId = `s-${rid()}`;
    sessions.push(sessionId);
    return sessionId;
  };
  /** The session's stream and meta as they are now. */
  const save = async (sessionId: string): Promise<Saved> => {
    const keys = log.keys(sessionId);
    return Promise.all(
      [keys.events, keys.meta].map(async (key) => [key, await redis.dumpBuffer(key)] as [string, Buffer | null]),
    );
  };
  /** Puts the saved keys back: what a replica that missed every write since `save` would hold. */
  const rollBack = async (saved: Saved): Promise<void> => {
    for (const [key, dump] of saved) {
      if (dump === null) await redis.del(key);
      else await redis.restore(key, 0, dump, "REPLACE");
    }
  };

  before(() => {
    redis = connectRedis();
    log = createEventLog({ redis, prefix });
  });
  after(async () => {
    for (const sessionId of sessions) await log.destroy(sessionId);
    await redis.del(`${prefix}sessions`);
    redis.disconnect();
  });

  it("others may append between a writer's batches: interleaving is not a rollback", async () => {
    const sessionId = session();
    const begun = await log.beginAttempt(sessionId, "t1");
    const writer = createWriter({ log, session: sessionId, epoch: begun.epoch, startSeq: begun.lastSeq });
    await writer.write(line("a"));
    assert.equal(await writer.flush(), 1);
    await log.appendUnfenced(sessionId, [queued("t2")], { ackedSeq: 0 });
    await log.appendUnfenced(sessionId, [queued("t3")]);
    await writer.write(line("b"));
    assert.equal(await writer.flush(), 4);
    assert.equal(writer.failure, undefined);
    assert.equal((await log.stat(sessionId)).lastSeq, 4);
  });

  it("head below the acknowledged seq: rolled_back with the real head, nothing written", async () => {
    const sessionId = session();
    const { epoch } = await log.beginAttempt(sessionId, "t1");
    const first = await log.append(sessionId, epoch, [line("a")], { batchId: "w1:1", ackedSeq: 0 });
    const saved = await save(sessionId);
    const second = await log.append(sessionId, epoch, [line("b"), line("c")], {
      batchId: "w1:2",
      ackedSeq: first.lastSeq,
    });
    assert.equal(second.lastSeq, 3);
    await rollBack(saved);
    const third = await log.append(sessionId, epoch, [line("d")], { batchId: "w1:3", ackedSeq: second.lastSeq });
    assert.deepEqual(third, { outcome: "rolled_back", lastSeq: 1, epoch });
    assert.equal(await redis.xlen(log.keys(sessionId).events), 1, "nothing of the refused batch was written");
  });

  it("the writer's own acknowledged batch is gone although others pushed the head past it", async () => {
    const sessionId = session();
    const { epoch } = await log.beginAttempt(sessionId, "t1");
    await log.append(sessionId, epoch, [line("a")], { batchId: "w2:1", ackedSeq: 0 });
    const saved = await save(sessionId);
    const second = await log.append(sessionId, epoch, [line("b")], { batchId: "w2:2", ackedSeq: 1 });
    await rollBack(saved);
    // After the failover, producers queue turns: the head passes seq 2 again, with other events.
    await log.appendUnfenced(sessionId, [queued("t2"), queued("t3")]);
    assert.equal((await log.stat(sessionId)).lastSeq, 3);
    const third = await log.append(sessionId, epoch, [line("c")], { batchId: "w2:3", ackedSeq: second.lastSeq });
    assert.equal(third.outcome, "rolled_back");
    assert.equal(third.lastSeq, 3);
  });

  it("a first batch finds the begin that gave its epoch lost: rolled_back, not fenced", async () => {
    const sessionId = session();
    await log.beginAttempt(sessionId, "t1");
    const saved = await save(sessionId);
    const begun = await log.beginAttempt(sessionId, "t1");
    await rollBack(saved);
    const res = await log.append(sessionId, begun.epoch, [line("a", begun.attempt)], {
      batchId: "w3:1",
      ackedSeq: begun.lastSeq,
    });
    assert.equal(res.outcome, "rolled_back");
    assert.equal(res.epoch, begun.epoch - 1);
  });

  it("a Redis that came back empty: rolled_back for a writer that had appended", async () => {
    const sessionId = session();
    const begun = await log.beginAttempt(sessionId, "t1");
    const writer = createWriter({ log, session: sessionId, epoch: begun.epoch, startSeq: begun.lastSeq });
    await writer.write(line("a"));
    await writer.flush();
    await redis.del(log.keys(sessionId).events, log.keys(sessionId).meta);
    await writer.write(line("b"));
    await assert.rejects(writer.flush(), (err: unknown) => {
      assert.ok(err instanceof LogRolledBackError, String(err));
      assert.equal(err.ackedSeq, 1);
      assert.equal(err.lastSeq, 0);
      assert.match(err.message, /lost acknowledged writes/);
      return true;
    });
    assert.ok(writer.failure instanceof LogRolledBackError, "the writer stopped");
    await assert.rejects(writer.write(line("c")), LogRolledBackError);
    assert.equal(await redis.exists(log.keys(sessionId).events), 0, "nothing was appended after the hole");
  });

  it("an exact expectedSeq above the head is a rollback, below it a conflict", async () => {
    const sessionId = session();
    await log.appendUnfenced(sessionId, [queued("t1"), queued("t2")]);
    assert.equal((await log.appendUnfenced(sessionId, [queued("t3")], { expectedSeq: 5 })).outcome, "rolled_back");
    assert.equal((await log.appendUnfenced(sessionId, [queued("t3")], { expectedSeq: 1 })).outcome, "conflict");
    assert.equal((await log.appendUnfenced(sessionId, [], { ackedSeq: 3 })).outcome, "rolled_back");
  });

  it("a tail that read events the log then lost ends with LogRolledBackError instead of waiting forever", async () => {
    const sessionId = session();
    const { epoch } = await log.beginAttempt(sessionId, "t1");
    await log.append(sessionId, epoch, [line("a")]);
    const saved = await save(sessionId);
    await log.append(sessionId, epoch, [line("b"), line("c")]);
    const seen: number[] = [];
    const tailed = (async () => {
      for await (const ev of log.tail(sessionId, { blockMs: 100 })) {
        seen.push(ev.seq);
        if (ev.seq === 3) await rollBack(saved);
      }
    })();
    await assert.rejects(tailed, (err: unknown) => {
      assert.ok(err instanceof LogRolledBackError, String(err));
      assert.deepEqual([err.ackedSeq, err.lastSeq], [3, 1]);
      return true;
    });
    assert.deepEqual(seen, [1, 2, 3]);
  });

  it("a re-sent batch that made it in is still a duplicate, and a superseded attempt still fenced", async () => {
    const sessionId = session();
    const old = await log.beginAttempt(sessionId, "t1");
    const first = await log.append(sessionId, old.epoch, [line("a")], { batchId: "w4:1", ackedSeq: old.lastSeq });
    const again = await log.append(sessionId, old.epoch, [line("a")], { batchId: "w4:1", ackedSeq: old.lastSeq });
    assert.deepEqual([again.outcome, again.lastSeq], ["duplicate", first.lastSeq]);
    await log.beginAttempt(sessionId, "t1");
    const writer = createWriter({ log, session: sessionId, epoch: old.epoch, startSeq: first.lastSeq });
    await writer.write(line("b"));
    await assert.rejects(writer.flush(), FencedError);
  });
});
