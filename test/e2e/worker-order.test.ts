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
      for (const session of sessions) {
        const enqueued = await producer.enqueueTurn({ session, prompt: `turn ${round} of ${session}`, cwd: ws });
        turns.set(session, [...(turns.get(session) ?? []), enqueued.turn]);
      }
    }
    const all = [...turns.values()].flat();
    const results = await Promise.all(all.map((t) => producer.waitForTurn(t, { timeoutMs: 150000 })));
    for (const result of results) assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    const workersUsed = new Set<unknown>();
    for (const session of sessions) {
      const events = await readAll(producer.log, session);
      const startedOrder = events.filter((e) => e.kind === "attempt.started").map((e) => e.turn);
      assert.deepEqual(
        startedOrder,
        turns.get(session),
        `session ${session} ran its turns in enqueue order, each once`,
      );
      let open: string | undefined;
      for (const event of events) {
        if (event.kind === "attempt.started") {
          assert.equal(
            open,
            undefined,
            `session ${session}: attempt of ${event.turn} started while ${open} was running`,
          );
          open = event.turn;
          workersUsed.add((event.data as Record<string, unknown>)["worker"]);
        } else if (event.kind === "turn.finished" || event.kind === "turn.failed") {
          assert.equal(open, event.turn);
          open = undefined;
        } else if (event.kind.startsWith("cli.")) {
          assert.equal(event.turn, open, `session ${session}: a CLI line of ${event.turn} outside its attempt`);
        }
      }
      assert.equal(events.filter((e) => e.kind === "turn.finished").length, TURNS_PER_SESSION);
    }
    assert.equal(workersUsed.size, 2, "both workers took turns");
  } finally {
    await fleet.dispose();
  }
});
