// Fair share with the real CLI: tenant A fills the fleet's queue, tenant B queues behind it; B's
// first turn starts within about one turn's time, not after A's queue, and A's own turns are still
// taken in the order A queued them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { rig } from "./_more.ts";

test("a tenant queued behind another's many turns starts within about one turn's time", async () => {
  const stage = await rig({ responses: [] });
  try {
    for (let index = 0; index < 2; index++) stage.worker({ concurrency: 2 });
    const queue = async (tenant: string, count: number) => {
      const queued = [];
      for (let index = 0; index < count; index++)
        queued.push(await stage.producer.enqueueTurn({ prompt: `${tenant} ${index}`, cwd: stage.ws, tenant }));
      return queued;
    };
    const teamA = await queue("team-a", 12);
    const teamB = await queue("team-b", 2);
    const all = [...teamA, ...teamB];
    for (const queued of all)
      assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 120_000 })).status, "finished");
    const times = await Promise.all(
      all.map(async (queued) => {
        const events = await stage.events(queued.session, queued.turn);
        const at = (kind: string): number => Date.parse(events.find((e) => e.kind === kind)!.at);
        return { queued: at("turn.queued"), started: at("attempt.started"), ended: at("turn.finished") };
      }),
    );
    const timesA = times.slice(0, teamA.length);
    const timesB = times.slice(teamA.length);
    const meanTurnMs = times.reduce((sum, t) => sum + (t.ended - t.started), 0) / times.length;
    const firstWaitB = timesB[0]!.started - timesB[0]!.queued;
    assert.ok(
      firstWaitB <= 2 * meanTurnMs,
      `B's first turn waited ${firstWaitB} ms; a turn takes ${Math.round(meanTurnMs)} ms`,
    );
    // Queued in order, A's 12 turns would all start before B's: at least half of them start after.
    const afterB = timesA.filter((t) => t.started > timesB[0]!.started).length;
    assert.ok(afterB >= teamA.length / 2, `only ${afterB} of A's turns started after B's first`);
    // A's own turns are taken in the order queued: with 4 slots, none starts before the one 4 places
    // ahead of it (start times of turns taken together may cross by a few milliseconds).
    const startsA = timesA.map((t) => t.started);
    for (let index = 4; index < startsA.length; index++)
      assert.ok(startsA[index]! > startsA[index - 4]!, `A's turn ${index} started before turn ${index - 4}`);
  } finally {
    await stage.dispose();
  }
});
