// The log's queries the worker reads a session by, on a real Redis: the latest snapshot found past
// several pages, earlier attempts that never ended, the last CLI session id, and turn ids that
// need escaping in the stored JSON.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  createEventLog,
  danglingAttempts,
  lastCliSessionId,
  type Envelope,
  type EventInput,
} from "../../src/log/index.ts";
import { createHash } from "node:crypto";
import {
  latestSnapshot,
  MAX_SNAPSHOT_DEPTH,
  SnapshotCache,
  snapshotData,
  snapshotRecord,
  type Snapshot,
} from "../../src/worker/index.ts";
import { redisFor } from "./_support.ts";

const redis = redisFor();
const prefix = `tslscan${randomBytes(3).toString("hex")}:`;
const log = createEventLog({ redis, prefix });
after(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const ev = (turn: string, attempt: number, kind: string, data: unknown = {}): EventInput => ({
  turn,
  attempt,
  kind,
  data,
});
const snapshot = (id: string, text: string) => snapshotData(Buffer.from(text), id, undefined);

test("the latest snapshot is found many entries back; earlier ones and other kinds are passed over", async () => {
  const session = `scan-${randomBytes(4).toString("hex")}`;
  const { epoch } = await log.beginAttempt(session, "t1");
  await log.append(session, epoch, [
    ev("t1", 1, "session.snapshot", snapshot("old-id", "old")),
    ev("t1", 1, "session.snapshot", snapshot("cli-1", "newest")),
  ]);
  const lines = Array.from({ length: 300 }, (_, i) =>
    ev("t1", 1, "cli.line", { raw: `{"n":${i},"kind":"session.snapshot"}` }),
  );
  await log.append(session, epoch, [...lines, ev("t1", 1, "turn.finished", { attempt: 1, cliSessionId: "cli-1" })]);
  const snap = await latestSnapshot(log, session);
  assert.equal(snap?.cliSessionId, "cli-1");
  assert.equal(snap?.bytes.toString(), "newest");
  assert.equal(await lastCliSessionId(log, session), "cli-1");
  assert.equal(await latestSnapshot(log, `none-${randomBytes(4).toString("hex")}`), undefined);
});

test("beginAttempt says where the latest snapshot is, so a new attempt reads no stream; a pointer it cannot trust is not given", async () => {
  const session = `ptr-${randomBytes(4).toString("hex")}`;
  await log.appendUnfenced(session, [ev("t1", 0, "turn.queued", { prompt: "hi" })]);
  const first = await log.beginAttempt(session, "t1");
  assert.equal(first.lastSnapshot, null, "a session created with this log version and no snapshot yet");
  assert.equal(await latestSnapshot(log, session, undefined, first.lastSnapshot), undefined);
  await log.append(session, first.epoch, [
    ev("t1", 1, "session.snapshot", snapshot("cli-a", "one")),
    ev("t1", 1, "session.snapshot", snapshot("cli-b", "two")),
  ]);
  await log.append(session, first.epoch, [ev("t1", 1, "turn.finished", { attempt: 1 })]);
  const second = await log.beginAttempt(session, "t2");
  const stored: Envelope[] = [];
  for await (const envelope of log.read(session, { fromSeq: 3, toSeq: 3 })) stored.push(envelope);
  assert.deepEqual(
    second.lastSnapshot,
    { seq: 3, epoch: first.epoch, at: stored[0]!.at },
    "the later of the two, with the epoch and time the cache checks",
  );
  const viaPointer = await latestSnapshot(log, session, undefined, second.lastSnapshot);
  const viaScan = await latestSnapshot(log, session);
  assert.equal(viaPointer?.bytes.toString(), "two");
  assert.deepEqual(viaPointer, viaScan);

  // An append by something else than this script moved `seq` on without `sseq`: the pointer may be stale.
  const meta = log.keys(session).meta;
  await redis.hincrby(meta, "seq", 1);
  assert.equal((await log.beginAttempt(session, "t2")).lastSnapshot, undefined);
  await redis.hincrby(meta, "seq", -1);
  assert.notEqual((await log.beginAttempt(session, "t2")).lastSnapshot, undefined);
  // An older writer appends a snapshot (seq moves, the pointer does not); a later append here of
  // another kind must not make the stale pointer look current again.
  const other = await log.beginAttempt(session, "t2");
  const foreign = log.encode(
    session,
    other.epoch,
    ev("t2", other.attempt, "session.snapshot", snapshot("cli-c", "three")),
  );
  await redis.xadd(log.keys(session).events, `0-${(await log.stat(session)).lastSeq + 1}`, "e", foreign.env);
  await redis.hincrby(meta, "seq", 1);
  await log.append(session, other.epoch, [ev("t2", other.attempt, "turn.finished", { attempt: other.attempt })]);
  const afterForeign = await log.beginAttempt(session, "t3");
  assert.equal(afterForeign.lastSnapshot, undefined, "the pointer was dropped, not trusted again");
  assert.equal((await latestSnapshot(log, session, undefined, afterForeign.lastSnapshot))?.bytes.toString(), "three");
  await log.append(session, afterForeign.epoch, [
    ev("t3", afterForeign.attempt, "session.snapshot", snapshot("cli-d", "four")),
  ]);
  assert.notEqual((await log.beginAttempt(session, "t3")).lastSnapshot, undefined, "the next snapshot sets it again");
  // A snapshot envelope whose head the script cannot read: the pointer is dropped, not left behind.
  await log.appendEncoded(session, null, [
    {
      kind: "session.snapshot",
      env: JSON.stringify({ kind: "session.snapshot", v: 1 }),
      raw: undefined,
      blob: undefined,
      bytes: 40,
    },
  ]);
  assert.equal((await log.beginAttempt(session, "t2")).lastSnapshot, undefined);
  // A session from before the pointer existed (no `snap` at all): found by the scan.
  await redis.hdel(meta, "snap");
  assert.equal((await log.beginAttempt(session, "t2")).lastSnapshot, undefined);
});

test("dangling attempts: begun and never ended (with or without attempt.started), below the current one, of this turn only", async () => {
  const session = `scan-${randomBytes(4).toString("hex")}`;
  const turn = 'odd"turn\\id';
  await log.appendUnfenced(session, [ev(turn, 0, "turn.queued", { prompt: "p" })], { batchId: "q-1:1" });
  const { epoch: e0 } = await log.beginAttempt(session, "other");
  await log.append(session, e0, [ev("other", 1, "attempt.started", { attempt: 1 })]);
  for (let attemptNumber = 1; attemptNumber <= 4; attemptNumber++) {
    const { epoch, attempt } = await log.beginAttempt(session, turn);
    assert.equal(attempt, attemptNumber);
    const events = [ev(turn, attemptNumber, "attempt.started", { attempt: attemptNumber })];
    if (attemptNumber === 2)
      events.push(ev(turn, attemptNumber, "attempt.abandoned", { attempt: 2, reason: "rate_limit", retry: true }));
    // Attempt 3 is recorded abandoned by attempt 4 (as a worker does when it finds a crashed one).
    if (attemptNumber === 4)
      events.push(ev(turn, 4, "attempt.abandoned", { attempt: 3, reason: "worker_crashed", retry: true }));
    await log.append(session, epoch, events);
  }
  assert.deepEqual(await danglingAttempts(log, session, turn, 5), [1, 4]);
  // Attempt 5 dies before anything of it reached the log (attempt.started waits for the CLI's first line).
  assert.equal((await log.beginAttempt(session, turn)).attempt, 5);
  assert.deepEqual(await danglingAttempts(log, session, turn, 6), [1, 4, 5]);
  assert.deepEqual(await danglingAttempts(log, session, turn, 2), [1]);
  assert.deepEqual(await danglingAttempts(log, session, turn, 1), []);
  assert.deepEqual(await danglingAttempts(log, session, "other", 2), [1]);
});

test("snapshots: a growing session file is stored as deltas, restored whole, and stored whole again every so often", async () => {
  const session = `scan-${randomBytes(4).toString("hex")}`;
  const { epoch } = await log.beginAttempt(session, "t1");
  let file = Buffer.from(`${'{"type":"attachment","big":"' + "x".repeat(20000)}"}\n`);
  let restored: Snapshot | undefined;
  const stored: number[] = [];
  for (let turn = 1; turn <= MAX_SNAPSHOT_DEPTH + 3; turn++) {
    file = Buffer.concat([file, Buffer.from(`{"turn":${turn},"text":"${"y".repeat(300)}"}\n`)]);
    const data = snapshotData(file, "cli-9", restored);
    stored.push(Buffer.from(data.base64, "base64").length);
    await log.append(session, epoch, [ev("t1", 1, "cli.line", { raw: "{}" }), ev("t1", 1, "session.snapshot", data)]);
    restored = await latestSnapshot(log, session);
    assert.ok(restored !== undefined, `turn ${turn}`);
    assert.ok(restored.bytes.equals(file), `turn ${turn}: restored whole`);
    assert.equal(restored.depth, data.depth ?? 0);
  }
  assert.ok(stored[0]! > 20000 && stored[1]! < 400, "the second snapshot stores only what was appended");
  assert.ok(stored[MAX_SNAPSHOT_DEPTH + 1]! > 20000, "after MAX_SNAPSHOT_DEPTH deltas the whole file again");
  // The CLI rewrote an earlier byte: a whole snapshot, never a delta on a stale base.
  const rewritten = Buffer.from(file);
  rewritten[10] = 0x41;
  const rewrittenData = snapshotData(rewritten, "cli-9", restored);
  assert.equal(rewrittenData.baseSeq, undefined);
  assert.equal(Buffer.from(rewrittenData.base64, "base64").length, rewritten.length);
});

test("snapshots: a chain that does not rebuild the recorded file is refused, not restored", async () => {
  const session = `scan-${randomBytes(4).toString("hex")}`;
  const { epoch } = await log.beginAttempt(session, "t1");
  const first = Buffer.from("line one\n");
  await log.append(session, epoch, [ev("t1", 1, "session.snapshot", snapshotData(first, "cli-1", undefined))]);
  const base = await latestSnapshot(log, session);
  const next = snapshotData(Buffer.from("line one\nline two\n"), "cli-1", base);
  assert.equal(next.baseSeq, base!.seq);
  // A delta whose recorded hash does not match what its chain rebuilds, and one whose base is gone.
  await log.append(session, epoch, [ev("t1", 1, "session.snapshot", { ...next, sha256: "0".repeat(64) })]);
  assert.equal(await latestSnapshot(log, session), undefined);
  await log.append(session, epoch, [ev("t1", 1, "session.snapshot", { ...next, baseSeq: 999 })]);
  assert.equal(await latestSnapshot(log, session), undefined);
  await log.append(session, epoch, [ev("t1", 1, "session.snapshot", next)]);
  assert.equal((await latestSnapshot(log, session))?.bytes.toString(), "line one\nline two\n");
});

test("snapshot cache: the latest snapshot comes from memory only when epoch and time match what the log holds", async () => {
  const session = `scan-${randomBytes(4).toString("hex")}`;
  const cache = new SnapshotCache();
  const { epoch } = await log.beginAttempt(session, "t1");
  const first = Buffer.from("line one\n");
  const at = "2026-12-03T08:00:00.000Z";
  await log.append(session, epoch, [
    { ...ev("t1", 1, "session.snapshot", snapshotData(first, "cli-1", undefined)), at },
  ]);
  // Read once from the log: cached under the writing attempt's epoch and the event's time.
  const fromLog = await latestSnapshot(log, session, cache);
  assert.equal(fromLog?.bytes.toString(), "line one\n");
  assert.equal(cache.bytes, first.length);
  // A newest entry of the same epoch and time that the log itself would refuse (its hash is wrong):
  // the answer comes from memory, with the log's seq.
  const seq = fromLog!.seq;
  const broken = { ...snapshotData(first, "cli-1", undefined), sha256: "0".repeat(64) };
  await log.append(session, epoch, [{ ...ev("t1", 1, "session.snapshot", broken), at }]);
  assert.equal(await latestSnapshot(log, session), undefined, "without the cache it is refused");
  const hit = await latestSnapshot(log, session, cache);
  assert.equal(hit?.bytes.toString(), "line one\n");
  assert.equal(hit?.seq, seq + 1);
  // Same epoch, another time (a session deleted and begun again under its id): not taken from memory.
  const other = Buffer.from("another conversation\n");
  await log.append(session, epoch, [
    { ...ev("t1", 1, "session.snapshot", snapshotData(other, "cli-2", undefined)), at: "2026-12-03T08:00:01.000Z" },
  ]);
  assert.equal((await latestSnapshot(log, session, cache))?.bytes.toString(), "another conversation\n");
  // A later attempt's snapshot is a miss for what the earlier attempt cached.
  const { epoch: e2 } = await log.beginAttempt(session, "t2");
  cache.set(session, epoch, at, { seq: 0, cliSessionId: "cli-1", bytes: first, depth: 0 });
  await log.append(session, e2, [
    { ...ev("t2", 1, "session.snapshot", snapshotData(Buffer.from("turn two\n"), "cli-3", undefined)), at },
  ]);
  assert.equal((await latestSnapshot(log, session, cache))?.bytes.toString(), "turn two\n");
});

test("snapshot cache: least recently used sessions go first past the byte limit; a file above it is not kept", () => {
  const cache = new SnapshotCache(100);
  const snap = (n: number): Snapshot => ({ seq: 1, cliSessionId: "c", bytes: Buffer.alloc(n), depth: 0 });
  cache.set("a", 1, "t", snap(40));
  cache.set("b", 1, "t", snap(40));
  assert.ok(cache.get("a", 1, "t", 5) !== undefined, "a is now the most recent");
  cache.set("c", 1, "t", snap(40));
  assert.equal(cache.get("b", 1, "t", 5), undefined, "b was least recently used");
  assert.ok(cache.get("a", 1, "t", 5) !== undefined && cache.get("c", 1, "t", 5) !== undefined);
  assert.equal(cache.bytes, 80);
  cache.set("d", 1, "t", snap(101));
  assert.equal(cache.get("d", 1, "t", 5), undefined);
  assert.equal(cache.bytes, 80);
  cache.set("a", 2, "t", snap(10));
  assert.equal(cache.get("a", 1, "t", 5), undefined, "replaced by the newer epoch");
  assert.equal(cache.bytes, 50);
});

test("snapshot hashes: a delta's recorded sha256 (from the restored hash state) is the whole file's", () => {
  let file = Buffer.from("x".repeat(5000));
  let restored: Snapshot | undefined;
  for (let turn = 1; turn <= MAX_SNAPSHOT_DEPTH + 2; turn++) {
    file = Buffer.concat([file, Buffer.from(`turn ${turn}\n`)]);
    const { data, hash } = snapshotRecord(file, "cli", restored);
    assert.equal(data.sha256, createHash("sha256").update(file).digest("hex"), `turn ${turn}`);
    assert.equal(data.depth !== undefined, turn > 1 && turn !== MAX_SNAPSHOT_DEPTH + 2, `turn ${turn}: delta or whole`);
    restored = { seq: turn, cliSessionId: "cli", bytes: file, depth: data.depth ?? 0, hash };
  }
});
