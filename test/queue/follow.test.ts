// Shared session tails for waits, on a real Redis: one tail per session however many waits, a wait
// that starts behind the tail catches up in order, and waits end independently.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { connectRedis, createEventLog, type Envelope, type EventInput } from "../../src/log/index.ts";
import { SessionFollowers } from "../../src/queue/follow.ts";

const redis = connectRedis({ url: "redis://127.0.0.1:6379" });
const prefix = `tsfollow${randomBytes(3).toString("hex")}:`;
const log = createEventLog({ redis, prefix });
let tails = 0;
let openTails = 0;
const tail = log.tail.bind(log);
log.tail = async function* (...args: Parameters<typeof tail>) {
  tails++;
  openTails++;
  try {
    yield* tail(...args);
  } finally {
    openTails--;
  }
};
after(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const line = (turn: string, index: number): EventInput => ({
  turn,
  attempt: 1,
  kind: "cli.line",
  data: { raw: `{"n":${index}}` },
});
const finished = (turn: string): EventInput => ({ turn, attempt: 1, kind: "turn.finished", data: { attempt: 1 } });
const collect =
  (seen: Envelope[]) =>
  (ev: Envelope): boolean => (seen.push(ev), ev.kind === "turn.finished");
const waitFor = async (cond: () => boolean): Promise<void> => {
  for (let tries = 0; tries < 200 && !cond(); tries++) await new Promise((r) => setTimeout(r, 10));
};

test("many waits on one session share one tail; a wait started behind it catches up in order", async () => {
  const sessionId = `f-${randomBytes(4).toString("hex")}`;
  const followers = new SessionFollowers(log, { blockMs: 200 });
  const turns = ["t1", "t2", "t3", "t4", "t5"];
  const { epoch } = await log.beginAttempt(sessionId, "t1");
  await log.append(sessionId, epoch, [line("t1", 0), line("t2", 0), line("t3", 0)]);
  const before = tails;
  const seen = new Map(turns.map((t) => [t, [] as Envelope[]]));
  // t2..t5 wait from seq 2 on; the shared tail moves ahead.
  const waits = turns.slice(1).map((t) => followers.follow(sessionId, t, 2, collect(seen.get(t)!)));
  await log.append(sessionId, epoch, [line("t2", 1), line("t3", 1), finished("t2")]);
  await waitFor(() => seen.get("t2")!.length === 2);
  // t1 waits from seq 1, behind the tail: it must still get its first event, then the live ones.
  const late = followers.follow(sessionId, "t1", 1, collect(seen.get("t1")!));
  await log.append(sessionId, epoch, [line("t1", 1), ...turns.filter((t) => t !== "t2").map(finished)]);
  await Promise.all([...waits, late]);
  assert.equal(tails - before, 1, "one tail for all five waits");
  const all: Envelope[] = [];
  for await (const event of log.read(sessionId)) all.push(event);
  for (const turn of turns) {
    const want = all.filter((e) => e.turn === turn && e.seq >= (turn === "t1" ? 1 : 2)).map((e) => e.seq);
    assert.deepEqual(
      seen.get(turn)!.map((e) => e.seq),
      want,
      turn,
    );
    assert.equal(seen.get(turn)!.at(-1)?.kind, "turn.finished", turn);
  }
  await waitFor(() => openTails === 0);
  assert.equal(openTails, 0, "the tail closes when its last wait ends");
});

test("aborting one wait leaves the others; a listener that throws ends only its own wait", async () => {
  const sessionId = `f-${randomBytes(4).toString("hex")}`;
  const followers = new SessionFollowers(log, { blockMs: 200 });
  const { epoch } = await log.beginAttempt(sessionId, "a");
  const ac = new AbortController();
  const seenB: Envelope[] = [];
  const abortedWait = followers.follow(sessionId, "a", 1, () => false, ac.signal);
  const collectingWait = followers.follow(sessionId, "b", 1, collect(seenB));
  const throwingWait = followers.follow(sessionId, "c", 1, () => {
    throw new Error("listener broke");
  });
  ac.abort(new Error("stop waiting"));
  await assert.rejects(abortedWait, /stop waiting/);
  await log.append(sessionId, epoch, [line("c", 1), line("b", 1), finished("b")]);
  await assert.rejects(throwingWait, /listener broke/);
  await collectingWait;
  assert.deepEqual(
    seenB.map((e) => e.kind),
    ["cli.line", "turn.finished"],
  );
  followers.close();
});

test("waits that need only lines and the end pass other kinds over undecoded; a wait with onEvent gets them all", async () => {
  const sessionId = `f-${randomBytes(4).toString("hex")}`;
  const followers = new SessionFollowers(log, { blockMs: 200 });
  const { epoch } = await log.beginAttempt(sessionId, "t1");
  // A snapshot whose blob is gone cannot be decoded: only a wait that skips it gets past it.
  const big = { cliSessionId: "c", bytes: 1, sha256: "0".repeat(64), base64: "x".repeat(2 * 1024 * 1024) };
  await log.append(sessionId, epoch, [line("t1", 0), { turn: "t1", attempt: 1, kind: "session.snapshot", data: big }]);
  const blobs = await redis.keys(`${prefix}{s:${sessionId}}:blob:*`);
  assert.equal(blobs.length, 1, "the snapshot went to a blob");
  await redis.del(...blobs);
  await log.append(sessionId, epoch, [line("t1", 1), finished("t1")]);
  const lean: Envelope[] = [];
  await followers.follow(sessionId, "t1", 1, collect(lean), undefined, false);
  assert.deepEqual(
    lean.map((e) => e.kind),
    ["cli.line", "cli.line", "turn.finished"],
  );
  await assert.rejects(followers.follow(sessionId, "t1", 1, collect([]), undefined, true), /blob .* is missing/);
  followers.close();
});
