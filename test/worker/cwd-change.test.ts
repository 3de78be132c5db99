// A session's next turn enqueued with another cwd does not resume the CLI session held under the old
// one (the CLI keeps a conversation under its cwd's project folder; the library's runThreadTurn
// starts fresh too). With the real CLI and the scripted model server, cold and warm: turn 1 in dir A,
// turn 2 in dir B starts a fresh CLI session (the model sees none of turn 1), says why
// (attempt.started `freshReason`, session.replaced `cwd_changed`), and the log keeps turn 1; turn 3,
// in B again, resumes turn 2's. Also the worker's reading of a snapshot from before snapshots
// recorded their cwd and running cost.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { createEventLog, type EventInput } from "../../src/log/index.ts";
import { fold } from "../../src/projector/index.ts";
import { writerCwd } from "../../src/log/index.ts";
import { reportedTotalBefore } from "../../src/worker/resume.ts";
import { snapshotData } from "../../src/worker/index.ts";
import { dataOf, rig } from "./_more.ts";
import { redisFor } from "./_support.ts";

async function acrossCwds(warm: boolean): Promise<void> {
  const stage = await rig({ responses: [] });
  try {
    stage.worker();
    const dirA = join(stage.ws, "dir-a");
    const dirB = join(stage.ws, "dir-b");
    mkdirSync(dirA);
    mkdirSync(dirB);
    const run = async (prompt: string, cwd: string, session?: string) => {
      const queued = await stage.producer.enqueueTurn({ prompt, cwd, session, options: { warm } });
      const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
      assert.equal(res.status, "finished", JSON.stringify(res.event.data));
      const events = await stage.events(queued.session, queued.turn);
      const request = stage.server
        .requests()
        .filter((q) => q.kind === "messages")
        .at(-1)!;
      return {
        ...queued,
        res,
        events,
        started: dataOf(events.find((e) => e.kind === "attempt.started")!),
        request: JSON.stringify(request.messages),
      };
    };
    const one = await run("remember marker-of-turn-one", dirA);
    const two = await run("what did I ask? marker-of-turn-two", dirB, one.session);
    const three = await run("and now? marker-of-turn-three", dirB, one.session);

    assert.ok(!two.request.includes("marker-of-turn-one"), "turn 2's model request holds nothing of turn 1");
    assert.equal(two.started["resume"], undefined, "turn 2 does not resume");
    assert.equal(two.started["snapshotSeq"], undefined, "nor restores turn 1's session file");
    assert.equal(two.started["freshReason"], "cwd_changed");
    assert.equal(two.started["cwd"], dirB);
    assert.notEqual(two.res.cliSessionId, one.res.cliSessionId);
    const replaced = two.events.filter((e) => e.kind === "session.replaced").map(dataOf);
    assert.deepEqual(replaced, [
      {
        by: "worker",
        reason: "cwd_changed",
        turns: 0,
        previousCliSessionId: one.res.cliSessionId,
        cliSessionId: two.res.cliSessionId,
      },
    ]);
    if (warm) assert.equal(two.started["warm"], "fingerprint_changed");

    assert.ok(three.request.includes("marker-of-turn-two"), "turn 3, in the same cwd as turn 2, continues it");
    assert.ok(!three.request.includes("marker-of-turn-one"));
    assert.equal(three.started["resume"], two.res.cliSessionId);
    assert.equal(three.started["freshReason"], undefined);
    if (warm) assert.equal(three.started["warm"], "warm");

    // The log keeps the whole session, turn 1 included; a fresh CLI session's cost counts from 0.
    const folded = fold(await stage.events(one.session));
    assert.deepEqual(
      folded.transcript.turns.map((t) => t.prompt),
      ["remember marker-of-turn-one", "what did I ask? marker-of-turn-two", "and now? marker-of-turn-three"],
    );
    assert.deepEqual(
      folded.view.turns.map((t) => t.status),
      ["finished", "finished", "finished"],
    );
    const costs = folded.view.turns.map((t) => t.attempts[0]!.costUsd);
    assert.ok(
      costs.every((c) => c > 0 && Math.abs(c - costs[0]!) < 1e-12),
      `each turn costs the same: ${costs.join(", ")}`,
    );
  } finally {
    await stage.dispose();
  }
}

test("cold: a turn in another cwd starts a fresh CLI session, says why, and the log keeps the history", async () => {
  await acrossCwds(false);
});

test("warm: a turn in another cwd starts a fresh process and CLI session, says why", async () => {
  await acrossCwds(true);
});

const redis = redisFor();
const prefix = `tscwd${randomBytes(3).toString("hex")}:`;
const log = createEventLog({ redis, prefix });
after(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

test("a snapshot written before snapshots held their cwd and cost: both read from the attempt that wrote it", async () => {
  const session = `old-${randomBytes(4).toString("hex")}`;
  const ev = (turn: string, attempt: number, kind: string, data: unknown): EventInput => ({
    turn,
    attempt,
    kind,
    data,
  });
  await log.appendUnfenced(session, [ev("t1", 0, "turn.queued", { prompt: "hi", cwd: "/ws/old" })]);
  const { epoch } = await log.beginAttempt(session, "t1");
  const result = (sid: string, total: number) =>
    JSON.stringify({
      type: "result",
      subtype: "success",
      is_error: false,
      session_id: sid,
      total_cost_usd: total,
      result: "ok",
    });
  await log.append(session, epoch, [
    ev("t1", 1, "attempt.started", { worker: "w", attempt: 1, cwd: "/ws/old" }),
    ev("t1", 1, "cli.line", { raw: result("cli-x", 0.25) }),
    ev("t1", 1, "cli.line", { raw: result("cli-other", 9) }),
    ev("t1", 1, "cli.exit", { code: 0, signal: null, durationMs: 1 }),
  ]);
  // An unfenced event of a later turn lands between the attempt's start and its snapshot.
  await log.appendUnfenced(session, [ev("t2", 0, "turn.queued", { prompt: "next", cwd: "/ws/new" })]);
  const { lastSeq } = await log.append(session, epoch, [
    ev("t1", 1, "session.snapshot", snapshotData(Buffer.from("file"), "cli-x", undefined)),
  ]);
  assert.equal(await writerCwd(log, session, lastSeq), "/ws/old");
  assert.equal(
    await reportedTotalBefore(log, session, lastSeq, "cli-x"),
    0.25,
    "that CLI session's total, not another's",
  );
  assert.equal(await reportedTotalBefore(log, session, lastSeq, "cli-none"), undefined);
});
