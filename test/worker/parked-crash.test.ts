// A worker killed while it parks a turn (worker processes, the real CLI, the scripted model server):
// after the CLI deferred and exited but before turn.parked, and after turn.parked but before the
// request's pending entry is marked parked. Another worker takes the turn over; safe means no call
// runs twice or without its own allow, and the turn neither hangs nor loses its request. The two
// scenarios run side by side, each on a fleet of its own: each needs its queue's only worker to be the
// one that dies at its crash point.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { listPending, type PendingRequest } from "../../src/decisions/index.ts";
import { OPERATOR } from "../decisions/_support.ts";
import { appendTo, decisionsOf, endDecidingParks, linesOf, parksOf, say } from "./_parked-attacks.ts";
import { processFleet, waitUntil, type ProcessFleet } from "./_support.ts";

const CRASHING_WORKER = join(import.meta.dirname, "_crashing-worker.ts");
const ENV = { TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey, LOG_LEVEL: "info" };

/** The session's parked requests right now. */
async function parkedNow(fleet: ProcessFleet, session: string): Promise<PendingRequest[]> {
  const all = await listPending({ redis: fleet.redis, prefix: fleet.space.logPrefix });
  return all.filter((p) => p.session === session && p.status === "parked");
}

describe("parked crash", { concurrency: true }, () => {
  test("parked crash: a worker killed after its CLI deferred, before turn.parked: the turn is taken over and each call runs at most once", async (ctx) => {
    const fleet = await processFleet((ws: string) => ({
      responses: [
        { content: [appendTo(join(ws, "ran.txt"), "first")] },
        { content: [appendTo(join(ws, "ran.txt"), "second")] },
        say("done"),
      ],
    }));
    ctx.after(() => fleet.dispose());
    const doomed = await fleet.start("a", { ...ENV, TURNSTREAM_TEST_CRASH_AT: "turn.parked" }, CRASHING_WORKER);
    const { session, turn } = await fleet.producer.enqueueTurn({
      prompt: "append",
      cwd: fleet.ws,
      options: { supervised: true },
    });
    assert.equal((await doomed.exited).signal, "SIGKILL");
    assert.deepEqual(await parksOf(fleet.producer.log, session), [], "it died before turn.parked");
    await fleet.start("b", ENV, CRASHING_WORKER);
    // Whatever the turn parks on from here on is allowed, each request once.
    const where = { producer: fleet.producer, redis: fleet.redis, prefix: fleet.space.logPrefix };
    const result = await endDecidingParks(where, { session, turn }, "allow");
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    const allows = (await decisionsOf(fleet.producer.log, session)).filter((d) => d.data.decision === "allow");
    const ran = linesOf(join(fleet.ws, "ran.txt"));
    assert.equal(new Set(ran).size, ran.length, `a call ran twice: ${ran.join(", ")}`);
    assert.ok(ran.length <= allows.length, "no call ran without its own allow");
  });

  test("parked crash: a worker killed after turn.parked, before the pending entry: the parked request is listed again for operators", async (ctx) => {
    const fleet = await processFleet((ws: string) => ({
      responses: [{ content: [appendTo(join(ws, "ran.txt"), "x")] }, say("done")],
    }));
    ctx.after(() => fleet.dispose());
    const doomed = await fleet.start("a", { ...ENV, TURNSTREAM_TEST_CRASH_AT: "parked-entry" }, CRASHING_WORKER);
    const { session } = await fleet.producer.enqueueTurn({
      prompt: "append",
      cwd: fleet.ws,
      options: { supervised: true, decisionDeadlineMs: 300_000 },
    });
    assert.equal((await doomed.exited).signal, "SIGKILL");
    assert.equal((await parksOf(fleet.producer.log, session)).length, 1, "it died after turn.parked");
    const taker = await fleet.start("b", ENV, CRASHING_WORKER);
    // The dead worker's job is taken over, finds its turn parked and unanswered, and waits again.
    await taker.waitFor((l) => l["msg"] === "worker ready", 60_000, "the second worker");
    const listed = await waitUntil(
      async () => (await parkedNow(fleet, session)).length > 0,
      30_000,
      "the parked request",
    )
      .then(() => true)
      .catch(() => false);
    assert.ok(listed, "the parked turn's request is not listed: no operator can see or wake it before its deadline");
  });
});
