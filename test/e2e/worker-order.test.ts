// Three sessions × three turns on two worker processes: each session's turns run in enqueue order and
// no two attempts of one session ever overlap (checked from the log), sessions run in parallel. The
// same checks over 1,000 turns on four workers: `npm run bench -- load`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { processFleet, readAll } from "../worker/_support.ts";

const TURNS_PER_SESSION = 3;

test("3 sessions × 3 turns on 2 workers: order per session kept, attempts of a session never overlap", async () => {
  const fleet = await processFleet({ responses: [] });
  const { space, producer, ws } = fleet;
  const env = { TURNSTREAM_CONCURRENCY: "2" };
  try {
    await Promise.all([fleet.start("a", env), fleet.start("b", env)]);
    const sessions = ["alpha", "beta", "gamma"].map((s) => `${s}-${space.id}`);
    const turns = new Map<string, string[]>();
    // Interleaved enqueue, as several producers would.
    for (let round = 0; round < TURNS_PER_SESSION; round++) {
      for (const s of sessions) {
        const enqueued = await producer.enqueueTurn({ session: s, prompt: `turn ${round} of ${s}`, cwd: ws });
        turns.set(s, [...(turns.get(s) ?? []), enqueued.turn]);
      }
    }
    const all = [...turns.values()].flat();
    const results = await Promise.all(all.map((t) => producer.waitForTurn(t, { timeoutMs: 150000 })));
    for (const r of results) assert.equal(r.status, "finished", JSON.stringify(r.event.data));
    const workersUsed = new Set<unknown>();
    for (const s of sessions) {
      const events = await readAll(producer.log, s);
      const startedOrder = events.filter((e) => e.kind === "attempt.started").map((e) => e.turn);
      assert.deepEqual(startedOrder, turns.get(s), `session ${s} ran its turns in enqueue order, each once`);
      let open: string | undefined;
      for (const e of events) {
        if (e.kind === "attempt.started") {
          assert.equal(open, undefined, `session ${s}: attempt of ${e.turn} started while ${open} was running`);
          open = e.turn;
          workersUsed.add((e.data as Record<string, unknown>)["worker"]);
        } else if (e.kind === "turn.finished" || e.kind === "turn.failed") {
          assert.equal(open, e.turn);
          open = undefined;
        } else if (e.kind.startsWith("cli.")) {
          assert.equal(e.turn, open, `session ${s}: a CLI line of ${e.turn} outside its attempt`);
        }
      }
      assert.equal(events.filter((e) => e.kind === "turn.finished").length, TURNS_PER_SESSION);
    }
    assert.equal(workersUsed.size, 2, "both workers took turns");
  } finally {
    await fleet.dispose();
  }
});
