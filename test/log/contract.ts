// The event log's contract, run against any Redis (standalone and cluster files call this).
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  createEventLog,
  createWriter,
  FencedError,
  InvalidEventError,
  UnfencedKindError,
  type Envelope,
  type EventLog,
  type RedisClient,
} from "../../src/log/index.ts";

export function rid(): string {
  return randomBytes(6).toString("hex");
}

async function all(it: AsyncIterable<Envelope>): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const item of it) out.push(item);
  return out;
}

const line = (raw: string, turn = "t1", attempt = 1) => ({ turn, attempt, kind: "cli.line", data: { raw } });

export function logContract(label: string, connect: () => Promise<RedisClient>, done: () => Promise<void>): void {
  describe(`event log contract (${label})`, () => {
    let redis: RedisClient;
    let log: EventLog;
    const prefix = `test:${rid()}:`;
    const sessions: string[] = [];
    const session = (): string => {
      const sessionId = `s-${rid()}`;
      sessions.push(sessionId);
      return sessionId;
    };

    before(async () => {
      redis = await connect();
      log = createEventLog({ redis, prefix, blobCapBytes: 1024 });
    });
    after(async () => {
      for (const sessionId of sessions) await log.destroy(sessionId);
      await redis.del(`${prefix}sessions`);
      redis.disconnect();
      await done();
    });

    it("keys share one hash tag and carry the prefix", () => {
      const keys = log.keys("abc");
      assert.equal(keys.events, `${prefix}{s:abc}:events`);
      assert.equal(keys.meta, `${prefix}{s:abc}:meta`);
      assert.equal(keys.blob("ff"), `${prefix}{s:abc}:blob:ff`);
    });

    it("appended: ids are 0-1, 0-2, …; envelope round-trips; raw text exact", async () => {
      const sessionId = session();
      const { epoch, attempt } = await log.beginAttempt(sessionId, "t1");
      assert.deepEqual({ epoch, attempt }, { epoch: 1, attempt: 1 });
      const raws = [
        '{"type":"system","subtype":"init"}',
        "not json at all\r",
        "",
        'ünïcödé ✓ \u0000 "quoted"',
        "  spaced  ",
      ];
      const res = await log.append(
        sessionId,
        epoch,
        raws.map((r) => line(r)),
      );
      assert.deepEqual(res, { outcome: "appended", lastSeq: 5, epoch: 1 });
      const ids = (await redis.xrange(log.keys(sessionId).events, "-", "+")).map(([id]) => id);
      assert.deepEqual(ids, ["0-1", "0-2", "0-3", "0-4", "0-5"]);
      const evs = await all(log.read(sessionId));
      assert.deepEqual(
        evs.map((e) => (e.data as { raw: string }).raw),
        raws,
      );
      assert.deepEqual(
        evs.map((e) => e.seq),
        [1, 2, 3, 4, 5],
      );
      for (const event of evs) {
        assert.equal(event.v, 1);
        assert.equal(event.session, sessionId);
        assert.equal(event.epoch, 1);
        assert.equal(event.kind, "cli.line");
        assert.ok(!Number.isNaN(Date.parse(event.at)));
      }
      const st = await log.stat(sessionId);
      assert.equal(st.lastSeq, 5);
      assert.equal(st.length, 5);
      assert.equal(st.epoch, 1);
      assert.equal(st.turn, "t1");
    });

    it("read honours fromSeq/toSeq across pages", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      await log.append(
        sessionId,
        epoch,
        Array.from({ length: 23 }, (_, i) => line(`l${i}`)),
      );
      const mid = await all(log.read(sessionId, { fromSeq: 5, toSeq: 17, pageSize: 4 }));
      assert.deepEqual(
        mid.map((e) => e.seq),
        Array.from({ length: 13 }, (_, i) => i + 5),
      );
      assert.equal((await all(log.read(sessionId, { pageSize: 5 }))).length, 23);
    });

    it("duplicate: a re-sent batch is not appended twice", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      const batch = [line("a"), line("b")];
      const first = await log.append(sessionId, epoch, batch, { batchId: "w1:1" });
      assert.deepEqual(first, { outcome: "appended", lastSeq: 2, epoch });
      const again = await log.append(sessionId, epoch, batch, { batchId: "w1:1" });
      assert.deepEqual(again, { outcome: "duplicate", lastSeq: 2, epoch });
      // Another writer in between does not hide the re-send.
      await log.appendUnfenced(sessionId, [{ turn: "t2", attempt: 0, kind: "turn.queued", data: {} }], {
        batchId: "p1:1",
      });
      assert.equal((await log.append(sessionId, epoch, batch, { batchId: "w1:1" })).outcome, "duplicate");
      const next = await log.append(sessionId, epoch, [line("c")], { batchId: "w1:2" });
      assert.deepEqual(next, { outcome: "appended", lastSeq: 4, epoch });
      // A duplicate is reported even after the epoch moved on: the sender must never re-append.
      await log.beginAttempt(sessionId, "t1");
      assert.equal((await log.append(sessionId, epoch, [line("c")], { batchId: "w1:2" })).outcome, "duplicate");
      assert.equal((await log.stat(sessionId)).lastSeq, 4);
    });

    it("duplicate: the same EVALSHA delivered twice (a client re-send after reconnect) appends once", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      const enc = [log.encode(sessionId, epoch, line("x"))];
      const [first, second] = await Promise.all([
        log.appendEncoded(sessionId, epoch, enc, { batchId: "wr:1" }),
        log.appendEncoded(sessionId, epoch, enc, { batchId: "wr:1" }),
      ]);
      assert.deepEqual([first.outcome, second.outcome].sort(), ["appended", "duplicate"]);
      assert.equal((await log.stat(sessionId)).length, 1);
    });

    it("fenced: an older epoch writes nothing", async () => {
      const sessionId = session();
      const old = await log.beginAttempt(sessionId, "t1");
      const cur = await log.beginAttempt(sessionId, "t1");
      assert.deepEqual([cur.epoch, cur.attempt], [old.epoch + 1, 2]);
      const res = await log.append(sessionId, old.epoch, [line("stale")]);
      assert.deepEqual(res, { outcome: "fenced", lastSeq: 0, epoch: cur.epoch });
      assert.equal((await log.stat(sessionId)).length, 0);
      const turn2 = await log.beginAttempt(sessionId, "t2");
      assert.equal(turn2.attempt, 1, "attempt counter restarts for a new turn");
    });

    it("conflict: expectedSeq must match the last seq", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      assert.equal((await log.append(sessionId, epoch, [line("a")], { expectedSeq: 0 })).outcome, "appended");
      const res = await log.append(sessionId, epoch, [line("b")], { expectedSeq: 0 });
      assert.deepEqual(res, { outcome: "conflict", lastSeq: 1, epoch });
      assert.equal((await log.append(sessionId, epoch, [line("b")], { expectedSeq: 1 })).lastSeq, 2);
      assert.equal((await log.stat(sessionId)).length, 2);
    });

    it("concurrent attempts: exactly one epoch wins, the other writer is fenced", async () => {
      const sessionId = session();
      const [first, second] = await Promise.all([log.beginAttempt(sessionId, "t1"), log.beginAttempt(sessionId, "t1")]);
      assert.notEqual(first.epoch, second.epoch);
      const wa = createWriter({ log, session: sessionId, epoch: first.epoch });
      const wb = createWriter({ log, session: sessionId, epoch: second.epoch });
      const feed = async (writer: typeof wa, tag: string): Promise<unknown> => {
        try {
          for (let index = 0; index < 50; index++) await writer.write(line(`${tag}${index}`, "t1", 1));
          return await writer.flush();
        } catch (err) {
          return err;
        }
      };
      const [ra, rb] = await Promise.all([feed(wa, "a"), feed(wb, "b")]);
      const results = [ra, rb];
      const fenced = results.filter((r) => r instanceof FencedError);
      assert.equal(fenced.length, 1, "exactly one writer is fenced");
      const winner = Math.max(first.epoch, second.epoch);
      assert.equal((fenced[0] as FencedError).currentEpoch, winner);
      const evs = await all(log.read(sessionId));
      assert.equal(evs.length, 50);
      assert.ok(evs.every((e) => e.epoch === winner));
      await assert.rejects(() => (first.epoch < second.epoch ? wa : wb).write(line("late")), FencedError);
    });

    it("unfenced kinds append without an epoch; attempt-bound kinds are refused", async () => {
      const sessionId = session();
      const res = await log.appendUnfenced(sessionId, [
        { turn: "t1", attempt: 0, kind: "turn.queued", data: { prompt: "redacted" } },
      ]);
      assert.equal(res.outcome, "appended");
      await assert.rejects(() => log.appendUnfenced(sessionId, [line("x")]), UnfencedKindError);
      const writer = createWriter({ log, session: sessionId, epoch: null });
      await writer.write({ turn: "t1", attempt: 0, kind: "decision.made", data: { allow: true } });
      await assert.rejects(() => writer.write(line("x")), UnfencedKindError);
      assert.equal(await writer.close(), 2);
      const [queued, decision] = await all(log.read(sessionId));
      assert.equal(queued!.epoch, 0);
      assert.equal(decision!.kind, "decision.made");
      assert.equal((await log.stat(sessionId)).state, "queued");
    });

    // The writer tests below wait on events, not on fixed sleeps: on a loaded machine a 20 ms sleep
    // can take 200. "Nothing was sent yet" is checked in Redis (XLEN) once `passed(ms)` resolves:
    // another writer, given an event after the writer under test, has appended it after its own
    // linger of `ms`. Timers never fire early, and one created later with a longer delay fires
    // later, so an append the writer under test would have started by then is in the stream
    // before the XLEN (same key, same connection). Lingers that must not run out before a check
    // are seconds long, so only a stall of that length could break a check that should pass.
    const controlKinds = { turn: "t1", attempt: 0, kind: "turn.queued", data: {} } as const;
    const passed = async (ms: number): Promise<void> => {
      let appended!: () => void;
      const done = new Promise<void>((r) => (appended = r));
      const control = createWriter({
        log,
        session: session(),
        epoch: null,
        lingerMs: ms,
        onAppended: () => appended(),
      });
      await control.write(controlKinds);
      await done;
      await control.close();
    };
    const stored = (s: string): Promise<number> => redis.xlen(log.keys(s).events);
    /** Resolves once `cond` holds (checked every 5 ms); fails after `ms`. Returns the wait in ms. */
    const until = async (cond: () => boolean, ms: number, what: string): Promise<number> => {
      const t0 = performance.now();
      while (!cond()) {
        if (performance.now() - t0 > ms) assert.fail(`not within ${ms} ms: ${what}`);
        await new Promise((r) => setTimeout(r, 5));
      }
      return performance.now() - t0;
    };

    it("writer linger: events close together share one append; flush does not wait for it; a full batch goes at once", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      const batches: number[] = [];
      const LINGER = 5000;
      const writer = createWriter({
        log,
        session: sessionId,
        epoch,
        lingerMs: LINGER,
        maxBatchEvents: 4,
        onAppended: (i) => batches.push(i.count),
      });
      await writer.write(line("a"));
      await passed(20);
      await writer.write(line("b"));
      await passed(20);
      assert.equal(await stored(sessionId), 0, "nothing sent inside the linger");
      assert.deepEqual(batches, []);
      const t0 = performance.now();
      assert.equal(await writer.flush(), 2);
      assert.ok(performance.now() - t0 < LINGER / 2, "flush sends at once");
      assert.deepEqual(batches, [2], "a and b shared one append");
      for (const tag of ["c", "d", "e", "f"]) await writer.write(line(tag));
      await until(() => batches.length === 2, LINGER / 2, "the full batch to go without its linger");
      assert.deepEqual(batches, [2, 4], "a full batch does not wait");
      assert.equal(await writer.close(), 6);
    });

    it("writer linger per event: a longer wait holds the batch for the events after it, bounded; the usual linger never slides", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      const batches: number[] = [];
      const writer = createWriter({
        log,
        session: sessionId,
        epoch,
        lingerMs: 20,
        onAppended: (i) => batches.push(i.count),
      });
      await writer.write(line("a"));
      await writer.write(line("b"), { lingerMs: 5000 });
      await passed(100);
      assert.equal(await stored(sessionId), 0, "held past the usual linger");
      await writer.write(line("c"));
      await passed(100);
      assert.equal(await stored(sessionId), 0, "a later event does not cut the wait short");
      assert.equal(await writer.close(), 3);
      assert.deepEqual(batches, [3], "one append for all three");

      // Bounded: nothing else comes, so it goes alone once its own wait (600 ms, not the usual 20) is over.
      const held: number[] = [];
      const w2 = createWriter({ log, session: sessionId, epoch, lingerMs: 20, onAppended: (i) => held.push(i.count) });
      await w2.write(line("d"), { lingerMs: 600 });
      await passed(20);
      assert.equal(await stored(sessionId), 3, "d waits longer than the usual linger");
      await until(() => held.length === 1, 5000, "d to go on its own once its wait ran out");
      assert.deepEqual(held, [1], "the wait is bounded: nothing else came, it went alone");

      // Never slides: f, written while e's linger runs, goes with e when e's linger ends. A second
      // writer on the same session, given an event just after e with the same linger, is due at the
      // same time or later; had f pushed the send back, that writer's event would be stored first.
      const s3 = session();
      const e3 = await log.beginAttempt(s3, "t1");
      const steady: number[] = [];
      const w3 = createWriter({
        log,
        session: s3,
        epoch: e3.epoch,
        lingerMs: 1000,
        onAppended: (i) => steady.push(i.count),
      });
      const rival = createWriter({ log, session: s3, epoch: null, lingerMs: 1000 });
      await w3.write(line("e"));
      await rival.write(controlKinds);
      await passed(20);
      await w3.write(line("f"));
      await until(() => steady.length > 0, 5000, "e's linger to end");
      await rival.close();
      assert.deepEqual(steady, [2], "the second event joined the first's window");
      const order = (await all(log.read(s3))).map((e) =>
        e.kind === "cli.line" ? (e.data as { raw: string }).raw : e.kind,
      );
      assert.deepEqual(order, ["e", "f", "turn.queued"], "instead of pushing it back");
      await w2.close();
      await w3.close();
    });

    it("writer hold: an event waits for the next one, which then goes on its own linger; a hold is bounded and flush cuts it short", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      const batches: number[] = [];
      const HOLD = 5000;
      const writer = createWriter({
        log,
        session: sessionId,
        epoch,
        lingerMs: 20,
        onAppended: (i) => batches.push(i.count),
      });
      await writer.write(line("a"), { holdMs: HOLD });
      await passed(100);
      assert.equal(await stored(sessionId), 0, "held past the usual linger");
      await writer.write(line("b"));
      await until(() => batches.length === 1, HOLD / 2, "b's linger to send both");
      assert.deepEqual(
        batches,
        [2],
        "the next event ended the hold and both went on its linger, long before the hold ran out",
      );

      await writer.write(line("c"), { holdMs: 600 });
      await passed(20);
      assert.equal(await stored(sessionId), 2, "c is held past the usual linger");
      await until(() => batches.length === 2, HOLD, "c to go once its hold ran out");
      assert.deepEqual(batches, [2, 1], "nothing came: it went alone once the hold ran out");

      await writer.write(line("d"), { holdMs: HOLD });
      const t0 = performance.now();
      assert.equal(await writer.flush(), 4);
      assert.ok(performance.now() - t0 < HOLD / 2, "flush does not wait out a hold");
      await writer.write(line("e"));
      await writer.write(line("f"), { holdMs: HOLD });
      await until(() => batches.length === 4, HOLD / 2, "e and f to go on the usual linger");
      assert.deepEqual(batches, [2, 1, 1, 2], "a hold behind a waiting event is the usual linger");
      assert.equal(await writer.close(), 6);
    });

    it("unknown dotted kinds are storable and readable; invalid events are rejected on write", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      await log.append(sessionId, epoch, [
        { turn: "t1", attempt: 1, kind: "future.thing_v2.sub", data: { n: [1, 2, { x: null }] } },
      ]);
      const [event] = await all(log.read(sessionId));
      assert.deepEqual(event!.data, { n: [1, 2, { x: null }] });
      assert.equal(event!.kind, "future.thing_v2.sub");
      await assert.rejects(
        () => log.append(sessionId, epoch, [{ turn: "t1", attempt: 1, kind: "NoDots", data: 1 }]),
        InvalidEventError,
      );
      await assert.rejects(
        () => log.append(sessionId, epoch, [{ turn: "t1", attempt: 1, kind: "cli.line", data: { text: "x" } }]),
        InvalidEventError,
      );
      assert.equal((await log.stat(sessionId)).length, 1);
    });

    it("a corrupt stored entry fails validation on read", async () => {
      const sessionId = session();
      await redis.xadd(
        log.keys(sessionId).events,
        "0-1",
        "e",
        JSON.stringify({ v: 1, turn: "t", attempt: 0, epoch: 0, at: "x", kind: "cli.line", data: {} }),
      );
      await assert.rejects(() => all(log.read(sessionId)), InvalidEventError);
    });

    it("blobs: data above the cap lives in a content-addressed key and reads back transparently", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      const big = "x".repeat(5000) + '"end"';
      const bigData = { items: Array.from({ length: 300 }, (_, i) => `item-${i}`) };
      await log.append(sessionId, epoch, [
        line(big),
        line(big),
        { turn: "t1", attempt: 1, kind: "session.snapshot", data: bigData },
        line("small"),
      ]);
      const blobs = await redis.smembers(log.keys(sessionId).blobs);
      assert.equal(blobs.length, 2, "identical lines share one blob");
      const stored = await redis.xrange(log.keys(sessionId).events, "0-1", "0-1");
      assert.ok(stored[0]![1].join("").length < 400, "the stream entry holds a reference, not the data");
      const evs = await all(log.read(sessionId));
      assert.equal((evs[0]!.data as { raw: string }).raw, big);
      assert.equal((evs[1]!.data as { raw: string }).raw, big);
      assert.deepEqual(evs[2]!.data, bigData);
      assert.equal((evs[3]!.data as { raw: string }).raw, "small");
    });

    it("tail follows new events and stops on abort", async () => {
      const sessionId = session();
      const { epoch } = await log.beginAttempt(sessionId, "t1");
      await log.append(sessionId, epoch, [line("0"), line("1")]);
      const ac = new AbortController();
      const seen: number[] = [];
      const tailing = (async () => {
        for await (const event of log.tail(sessionId, { fromSeq: 2, signal: ac.signal, blockMs: 500 })) {
          seen.push(event.seq);
          if (event.seq === 2) await log.append(sessionId, epoch, [line("2"), line("3")]);
          if (event.seq === 4) ac.abort();
        }
      })();
      await tailing;
      assert.deepEqual(seen, [2, 3, 4]);
    });

    it("tail with a turn yields exactly that turn's events (lines, blobs, unfenced kinds) and skips the rest", async () => {
      const sessionId = session();
      const blogs = createEventLog({ redis, prefix, blobCapBytes: 1024 });
      const { epoch } = await blogs.beginAttempt(sessionId, "t1");
      const big = "y".repeat(3000);
      // A turn id that is a prefix of another, and one mentioned inside another turn's data.
      await blogs.append(sessionId, epoch, [
        line("a", "t1"),
        line(big, "t10"),
        line('{"turn":"t1"}', "t2"),
        line(big, "t1"),
        { turn: "t1", attempt: 1, kind: "session.snapshot", data: { note: "t10" } },
      ]);
      await blogs.appendUnfenced(
        sessionId,
        [{ turn: "t1", attempt: 0, kind: "turn.cancelled", data: { reason: "x" } }],
        {
          batchId: "c-t1:1",
        },
      );
      const ac = new AbortController();
      const want = (await all(blogs.read(sessionId))).filter((e) => e.turn === "t1").map((e) => e.seq);
      const seen: number[] = [];
      for await (const event of blogs.tail(sessionId, { turn: "t1", signal: ac.signal, blockMs: 200 })) {
        assert.equal(event.turn, "t1");
        seen.push(event.seq);
        if (seen.length === want.length) ac.abort();
      }
      assert.deepEqual(seen, want);
      assert.equal(want.length, 4);
    });

    it("sessions() lists indexed sessions and prunes ones whose keys are gone", async () => {
      const firstSession = session();
      const secondSession = session();
      await log.beginAttempt(firstSession, "t1");
      await log.beginAttempt(secondSession, "t1");
      const listed = await log.sessions();
      assert.ok(listed.includes(firstSession) && listed.includes(secondSession));
      await redis.del(log.keys(secondSession).meta);
      const after = await log.sessions();
      assert.ok(after.includes(firstSession) && !after.includes(secondSession));
    });

    it("retention: a finished session's keys (blobs too) expire; a new turn makes them persistent again", async () => {
      const sessionId = session();
      const rlog = createEventLog({ redis, prefix, blobCapBytes: 1024, finishedTtlMs: 60_000 });
      const { epoch } = await rlog.beginAttempt(sessionId, "t1");
      await rlog.append(sessionId, epoch, [
        { turn: "t1", attempt: 1, kind: "attempt.started", data: {} },
        line("y".repeat(3000)),
      ]);
      const keys = rlog.keys(sessionId);
      const [blob] = await redis.smembers(keys.blobs);
      assert.equal(await redis.pttl(keys.events), -1);
      await rlog.append(sessionId, epoch, [{ turn: "t1", attempt: 1, kind: "turn.finished", data: {} }]);
      for (const key of [keys.events, keys.meta, keys.blobs, blob!]) {
        const ttl = await redis.pttl(key);
        assert.ok(ttl > 0 && ttl <= 60_000, `${key} expires (${ttl})`);
      }
      const st = await rlog.stat(sessionId);
      assert.equal(st.state, "finished");
      assert.ok(st.expiresInMs !== undefined);
      await rlog.appendUnfenced(sessionId, [{ turn: "t2", attempt: 0, kind: "turn.queued", data: {} }]);
      for (const key of [keys.events, keys.meta, keys.blobs, blob!])
        assert.equal(await redis.pttl(key), -1, `${key} persistent`);
    });
  });
}
