// The worker's backward scans of a session log, on a real Redis: the latest snapshot found past
// several pages, earlier attempts that never ended, the last CLI session id, and turn ids that
// need escaping in the stored JSON.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createEventLog, type EventInput } from "../../src/log/index.ts";
import { danglingAttempts, lastCliSessionId, latestSnapshot, MAX_SNAPSHOT_DEPTH, snapshotData, type Snapshot } from "../../src/worker/index.ts";
import { redisFor } from "./_support.ts";

const redis = redisFor();
const prefix = `tslscan${randomBytes(3).toString("hex")}:`;
const log = createEventLog({ redis, prefix });
after(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const ev = (turn: string, attempt: number, kind: string, data: unknown = {}): EventInput => ({ turn, attempt, kind, data });
const snapshot = (id: string, text: string) => snapshotData(Buffer.from(text), id, undefined);

test("the latest snapshot is found many entries back; earlier ones and other kinds are passed over", async () => {
  const s = `scan-${randomBytes(4).toString("hex")}`;
  const { epoch } = await log.beginAttempt(s, "t1");
  await log.append(s, epoch, [ev("t1", 1, "session.snapshot", snapshot("old-id", "old")), ev("t1", 1, "session.snapshot", snapshot("cli-1", "newest"))]);
  const lines = Array.from({ length: 300 }, (_, i) => ev("t1", 1, "cli.line", { raw: `{"n":${i},"kind":"session.snapshot"}` }));
  await log.append(s, epoch, [...lines, ev("t1", 1, "turn.finished", { attempt: 1, cliSessionId: "cli-1" })]);
  const snap = await latestSnapshot(log, s);
  assert.equal(snap?.cliSessionId, "cli-1");
  assert.equal(snap?.bytes.toString(), "newest");
  assert.equal(await lastCliSessionId(log, s), "cli-1");
  assert.equal(await latestSnapshot(log, `none-${randomBytes(4).toString("hex")}`), undefined);
});

test("dangling attempts: started and never ended, below the current one, of this turn only", async () => {
  const s = `scan-${randomBytes(4).toString("hex")}`;
  const turn = 'odd"turn\\id';
  await log.appendUnfenced(s, [ev(turn, 0, "turn.queued", { prompt: "p" })], { batchId: "q-1:1" });
  const { epoch: e0 } = await log.beginAttempt(s, "other");
  await log.append(s, e0, [ev("other", 1, "attempt.started", { attempt: 1 })]);
  for (let a = 1; a <= 4; a++) {
    const { epoch, attempt } = await log.beginAttempt(s, turn);
    assert.equal(attempt, a);
    const events = [ev(turn, a, "attempt.started", { attempt: a })];
    if (a === 2) events.push(ev(turn, a, "attempt.abandoned", { attempt: 2, reason: "rate_limit", retry: true }));
    // Attempt 3 is recorded abandoned by attempt 4 (as a worker does when it finds a crashed one).
    if (a === 4) events.push(ev(turn, 4, "attempt.abandoned", { attempt: 3, reason: "worker_crashed", retry: true }));
    await log.append(s, epoch, events);
  }
  assert.deepEqual(await danglingAttempts(log, s, turn, 5), [1, 4]);
  assert.deepEqual(await danglingAttempts(log, s, turn, 2), [1]);
  assert.deepEqual(await danglingAttempts(log, s, turn, 1), []);
  assert.deepEqual(await danglingAttempts(log, s, "other", 2), [1]);
});

test("snapshots: a growing session file is stored as deltas, restored whole, and stored whole again every so often", async () => {
  const s = `scan-${randomBytes(4).toString("hex")}`;
  const { epoch } = await log.beginAttempt(s, "t1");
  let file = Buffer.from(`${"{\"type\":\"attachment\",\"big\":\"" + "x".repeat(20000)}"}\n`);
  let restored: Snapshot | undefined;
  const stored: number[] = [];
  for (let turn = 1; turn <= MAX_SNAPSHOT_DEPTH + 3; turn++) {
    file = Buffer.concat([file, Buffer.from(`{"turn":${turn},"text":"${"y".repeat(300)}"}\n`)]);
    const data = snapshotData(file, "cli-9", restored);
    stored.push(Buffer.from(data.base64, "base64").length);
    await log.append(s, epoch, [ev("t1", 1, "cli.line", { raw: "{}" }), ev("t1", 1, "session.snapshot", data)]);
    restored = await latestSnapshot(log, s);
    assert.ok(restored !== undefined, `turn ${turn}`);
    assert.ok(restored.bytes.equals(file), `turn ${turn}: restored whole`);
    assert.equal(restored.depth, data.depth ?? 0);
  }
  assert.ok(stored[0]! > 20000 && stored[1]! < 400, "the second snapshot stores only what was appended");
  assert.ok(stored[MAX_SNAPSHOT_DEPTH + 1]! > 20000, "after MAX_SNAPSHOT_DEPTH deltas the whole file again");
  // The CLI rewrote an earlier byte: a whole snapshot, never a delta on a stale base.
  const rewritten = Buffer.from(file);
  rewritten[10] = 0x41;
  const d = snapshotData(rewritten, "cli-9", restored);
  assert.equal(d.baseSeq, undefined);
  assert.equal(Buffer.from(d.base64, "base64").length, rewritten.length);
});

test("snapshots: a chain that does not rebuild the recorded file is refused, not restored", async () => {
  const s = `scan-${randomBytes(4).toString("hex")}`;
  const { epoch } = await log.beginAttempt(s, "t1");
  const first = Buffer.from("line one\n");
  await log.append(s, epoch, [ev("t1", 1, "session.snapshot", snapshotData(first, "cli-1", undefined))]);
  const base = await latestSnapshot(log, s);
  const next = snapshotData(Buffer.from("line one\nline two\n"), "cli-1", base);
  assert.equal(next.baseSeq, base!.seq);
  // A delta whose recorded hash does not match what its chain rebuilds, and one whose base is gone.
  await log.append(s, epoch, [ev("t1", 1, "session.snapshot", { ...next, sha256: "0".repeat(64) })]);
  assert.equal(await latestSnapshot(log, s), undefined);
  await log.append(s, epoch, [ev("t1", 1, "session.snapshot", { ...next, baseSeq: 999 })]);
  assert.equal(await latestSnapshot(log, s), undefined);
  await log.append(s, epoch, [ev("t1", 1, "session.snapshot", next)]);
  assert.equal((await latestSnapshot(log, s))?.bytes.toString(), "line one\nline two\n");
});
