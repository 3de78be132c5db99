// Retention against a real Redis: an ended session is archived, verified and removed with every key
// it had; a session that moved after its copy is kept; a run stopped between any two steps and run
// again loses nothing and archives once; a restore writes the session back exactly.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import {
  FileArchive,
  restoreSession,
  RestoreRefusedError,
  runRetention,
  type RetentionOptions,
  type RetentionStep,
  type SessionState,
} from "../../src/archive/index.ts";
import { createEventLog, indexKey, type Envelope, type EventLog, type RedisClient } from "../../src/log/index.ts";
import { createProducer, orderKeys, turnRecordKey, type Producer } from "../../src/queue/index.ts";
import { cleanupKeys, redisFor, testSpace, type TestSpace } from "../worker/_support.ts";
import { keysUnder, readLog as readAll, tamperedState } from "./_support.ts";

const HOUR = 3_600_000;

interface Rig {
  space: TestSpace;
  redis: RedisClient;
  producer: Producer;
  log: EventLog;
  archive: FileArchive;
  /** The archived events of a session, as the store reads them back. */
  archived(session: string): Promise<Envelope[]>;
  /** The files in the archive folder. */
  files(): string[];
  retention(options?: Partial<RetentionOptions>): ReturnType<typeof runRetention>;
  close(): Promise<void>;
}

async function rig(): Promise<Rig> {
  const space = testSpace();
  const redis = redisFor();
  const { logPrefix, queuePrefix } = space;
  const producer = createProducer({ redis, logPrefix, queuePrefix });
  // A small blob cap, so the sessions' big lines are stored as blob keys.
  const log = createEventLog({ redis, prefix: logPrefix, blobCapBytes: 64 });
  const archive = new FileArchive(space.dir("archive"));
  await archive.migrate();
  return {
    space,
    redis,
    producer,
    log,
    archive,
    async archived(session) {
      const out: Envelope[] = [];
      for await (const event of archive.read(session)) out.push(event);
      return out;
    },
    files: () => readdirSync(archive.dir).sort(),
    retention: (options = {}) =>
      runRetention({
        log,
        redis,
        queue: producer.queue,
        archive,
        olderThanMs: HOUR,
        now: Date.now() + 2 * HOUR,
        ...options,
      }),
    async close() {
      await producer.close();
      await cleanupKeys(redis, space);
      redis.disconnect();
      space.cleanup();
    },
  };
}

/** A session with one turn run to its end the way a worker runs it: lease, attempt, a blob-sized line, finish. */
async function finishedSession(
  stage: Rig,
  key = randomUUID(),
  tenant?: string,
): Promise<{ session: string; turn: string }> {
  const cwd = stage.space.workspace();
  const { session, turn } = await stage.producer.enqueueTurn({
    prompt: "hello",
    cwd,
    idempotencyKey: key,
    ...(tenant === undefined ? {} : { tenant }),
  });
  const token = randomUUID();
  assert.equal((await stage.producer.order.acquire(session, turn, token, 30_000)).status, "ok");
  const { epoch, attempt } = await stage.log.beginAttempt(session, turn);
  const raw = JSON.stringify({ type: "assistant", text: "x".repeat(500) });
  await stage.log.append(session, epoch, [
    { turn, attempt, kind: "attempt.started", data: { worker: "w1" } },
    { turn, attempt, kind: "cli.line", data: { raw } },
    { turn, attempt, kind: "turn.finished", data: { attempt, cliSessionId: "cli-1" } },
  ]);
  await stage.producer.order.finish(session, turn, token);
  return { session, turn };
}

test("a finished session is archived and removed: no key of it, no index entry, no job record", async () => {
  const stage = await rig();
  try {
    const { session, turn } = await finishedSession(stage);
    assert.ok((await stage.redis.scard(stage.log.keys(session).blobs)) > 0, "the session has a blob key");
    const before = await readAll(stage.log, session);
    const report = await stage.retention();
    assert.deepEqual(
      report.sessions.map((entry) => [entry.session, entry.action]),
      [[session, "archived"]],
    );
    assert.deepEqual(await keysUnder(stage.redis, `${stage.space.logPrefix}*`), []);
    assert.equal(await stage.redis.zscore(indexKey(stage.space.logPrefix), session), null);
    assert.equal(await stage.producer.queue.getJob(turn), undefined);
    assert.equal(await stage.redis.exists(turnRecordKey(stage.space.queuePrefix, turn)), 0);
    assert.deepEqual(await stage.archived(session), before);

    assert.equal(await restoreSession(stage.log, stage.redis, stage.archive, session), "restored");
    assert.deepEqual(await readAll(stage.log, session), before);
    assert.equal(await stage.redis.hget(stage.log.keys(session).meta, "imported"), null, "a restore is not an import");
    assert.equal(await stage.redis.hget(stage.log.keys(session).meta, "state"), "finished");
    assert.ok(await stage.redis.hexists(orderKeys(stage.space.logPrefix, session).registered, turn));
    assert.equal(await restoreSession(stage.log, stage.redis, stage.archive, session), "present");
  } finally {
    await stage.close();
  }
});

test("a session that ended recently, or has a pending turn, is kept", async () => {
  const stage = await rig();
  try {
    const { session } = await finishedSession(stage);
    const waiting = await stage.producer.enqueueTurn({
      prompt: "more",
      cwd: stage.space.workspace(),
      idempotencyKey: "k2",
    });
    const report = await stage.retention();
    const bySession = new Map(report.sessions.map((entry) => [entry.session, entry]));
    assert.equal(bySession.get(session)?.action, "archived");
    assert.equal(bySession.get(waiting.session)?.action, "kept");
    assert.match(bySession.get(waiting.session)?.reason ?? "", /pending/);
    const recent = await stage.retention({ now: Date.now() });
    assert.deepEqual(recent.sessions, [], "nothing older than an hour is left");
  } finally {
    await stage.close();
  }
});

test("a turn enqueued between the copy and the removal keeps the session", async () => {
  const stage = await rig();
  try {
    const { session } = await finishedSession(stage);
    const report = await stage.retention({
      afterStep: async (_session, step) => {
        if (step === "verified")
          await stage.producer.enqueueTurn({ session, prompt: "again", cwd: stage.space.workspace() });
      },
    });
    assert.equal(report.sessions[0]?.action, "kept");
    assert.match(report.sessions[0]?.reason ?? "", /enqueued after the copy/);
    assert.equal(await stage.redis.llen(orderKeys(stage.space.logPrefix, session).turns), 1);
    assert.ok((await stage.log.stat(session)).lastSeq > 0);
  } finally {
    await stage.close();
  }
});

test("an event appended between the copy and the removal keeps the session", async () => {
  const stage = await rig();
  try {
    const { session, turn } = await finishedSession(stage);
    const report = await stage.retention({
      afterStep: async (_session, step) => {
        if (step === "verified")
          await stage.log.appendUnfenced(session, [{ turn, attempt: 0, kind: "rule.added", data: { rule: "x" } }]);
      },
    });
    assert.equal(report.sessions[0]?.action, "kept");
    assert.match(report.sessions[0]?.reason ?? "", /appended after the copy/);
    // The next run archives the longer log (the store replaces a copy that the new one extends).
    const again = await stage.retention();
    assert.equal(again.sessions[0]?.action, "archived");
    assert.equal((await stage.archive.digest(session))?.count, 5);
  } finally {
    await stage.close();
  }
});

test("without an archive nothing is removed unless history is discarded; a dry run changes nothing", async () => {
  const stage = await rig();
  try {
    const { session } = await finishedSession(stage);
    const keys = await keysUnder(stage.redis, `${stage.space.logPrefix}*`);
    const kept = await stage.retention({ archive: undefined });
    assert.equal(kept.sessions[0]?.action, "kept");
    assert.match(kept.sessions[0]?.reason ?? "", /no archive/);
    const dry = await stage.retention({ archive: undefined, discardHistory: true, dryRun: true });
    assert.equal(dry.sessions[0]?.action, "removed");
    const dryArchive = await stage.retention({ dryRun: true });
    assert.equal(dryArchive.sessions[0]?.action, "archived");
    assert.deepEqual(stage.files(), [], "a dry run stores nothing");
    assert.deepEqual(await keysUnder(stage.redis, `${stage.space.logPrefix}*`), keys);
    const discarded = await stage.retention({ archive: undefined, discardHistory: true });
    assert.deepEqual(
      discarded.sessions.map((entry) => [entry.session, entry.action]),
      [[session, "removed"]],
    );
    assert.deepEqual(await keysUnder(stage.redis, `${stage.space.logPrefix}*`), []);
  } finally {
    await stage.close();
  }
});

const STEPS: RetentionStep[] = ["copied", "stored", "verified", "retired", "read-models", "job-records", "unindexed"];

for (const crashAt of STEPS) {
  test(`a run stopped after "${crashAt}" and run again completes; the archive holds one copy`, async () => {
    const stage = await rig();
    try {
      const { session, turn } = await finishedSession(stage);
      const before = await readAll(stage.log, session);
      const crashed = await stage.retention({
        afterStep: (_session, step) => (step === crashAt ? Promise.reject(new Error("crash")) : Promise.resolve()),
      });
      assert.deepEqual(crashed.sessions[0], { session, action: "failed", reason: "crash" });
      const rerun = await stage.retention();
      // Stopped after its last step, the run had done everything: the rerun finds nothing to do.
      if (crashAt === "unindexed") assert.deepEqual(rerun.sessions, []);
      else assert.equal(rerun.sessions[0]?.action, "archived", JSON.stringify(rerun));
      assert.equal(await stage.redis.zscore(indexKey(stage.space.logPrefix), session), null);
      assert.deepEqual(await keysUnder(stage.redis, `${stage.space.logPrefix}*`), []);
      assert.equal(await stage.producer.queue.getJob(turn), undefined);
      assert.deepEqual(stage.files(), [`${session}.jsonl.gz`], "one copy, no temporary file left");
      assert.deepEqual(await stage.archived(session), before);
    } finally {
      await stage.close();
    }
  });
}

test("two restorers at once: one writes the session back, the other finds it", async () => {
  const stage = await rig();
  try {
    const { session } = await finishedSession(stage);
    const before = await readAll(stage.log, session);
    await stage.retention();
    const outcomes = await Promise.all([
      restoreSession(stage.log, stage.redis, stage.archive, session),
      restoreSession(stage.log, stage.redis, stage.archive, session),
    ]);
    assert.deepEqual(outcomes.sort(), ["present", "restored"]);
    assert.deepEqual(await readAll(stage.log, session), before);
  } finally {
    await stage.close();
  }
});

test("a restore interrupted half-way is started over by the next one", async () => {
  const stage = await rig();
  try {
    const { session } = await finishedSession(stage);
    const before = await readAll(stage.log, session);
    await stage.retention();
    // What a restorer that died after two events leaves: its mark and a partial log, its lock expired.
    await stage.redis.hset(stage.log.keys(session).meta, "restoring", "then");
    await stage.log.appendEncoded(
      session,
      null,
      before.slice(0, 2).map((ev) => stage.log.encode(session, ev.epoch, ev)),
      { expectedSeq: 0 },
    );
    assert.equal(await restoreSession(stage.log, stage.redis, stage.archive, session), "restored");
    assert.deepEqual(await readAll(stage.log, session), before);
    assert.equal(await stage.redis.hexists(stage.log.keys(session).meta, "restoring"), 0);
  } finally {
    await stage.close();
  }
});

test("an archived copy that was tampered with is refused, and nothing is written; an honest one comes back with its tenant", async () => {
  const stage = await rig();
  try {
    const { session } = await finishedSession(stage, randomUUID(), "acme/api");
    await stage.retention();
    const tampered: ((state: SessionState) => void)[] = [
      (state) => (state.meta["evil"] = "1"),
      (state) => (state.meta["state"] = "anything"),
      (state) => (state.meta["epoch"] = "-1"),
      (state) => (state.registered["not a turn"] = "1"),
      (state) => (state.conf["onLostSession"] = "explode"),
      (state) => (state.conf["tenant"] = "a}b"),
      (state) => (state.meta["w:writer"] = "1:999"),
    ];
    for (const tamper of tampered) {
      await assert.rejects(
        restoreSession(stage.log, stage.redis, tamperedState(stage.archive, tamper), session),
        RestoreRefusedError,
      );
      assert.equal((await stage.log.stat(session)).lastSeq, 0, "no event was written back");
    }
    assert.equal(await restoreSession(stage.log, stage.redis, stage.archive, session), "restored");
    // The restored session is still its tenant's: a turn naming another is refused.
    assert.equal(await stage.redis.hget(stage.producer.order.keys(session).conf, "tenant"), "acme/api");
    await assert.rejects(
      stage.producer.enqueueTurn({ prompt: "next", cwd: stage.space.workspace(), session, tenant: "other" }),
      /belongs to tenant acme\/api/,
    );
  } finally {
    await stage.close();
  }
});
