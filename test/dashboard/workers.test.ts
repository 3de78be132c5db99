// Workers in a real browser: a live worker (its heartbeat) running a real turn shows with one slot of
// two busy and the turn it runs; a turn whose job is active but whose attempt names a worker that no
// longer beats is listed as orphaned; a session the log says runs but no active job holds is listed
// as held by nobody. When the turn ends, the worker shows idle.
import { test } from "node:test";
import assert from "node:assert/strict";
import { rig } from "../worker/_more.ts";
import { consoleFor, screenshot } from "./_browser.ts";

/** A turn the log says started on `worker`, never ended. */
async function plantRunning(testRig: Awaited<ReturnType<typeof rig>>, session: string, turn: string, worker: string) {
  const log = testRig.producer.log;
  await log.appendUnfenced(session, [
    { turn, attempt: 0, kind: "turn.queued", data: { prompt: "hi", cwd: testRig.ws } },
  ]);
  const { epoch, attempt } = await log.beginAttempt(session, turn);
  await log.append(session, epoch, [
    { turn, attempt, kind: "attempt.started", data: { worker, attempt, cwd: testRig.ws } },
  ]);
}

test("workers: each live worker with its slots and running turn; turns whose worker is gone; running turns no job holds", async () => {
  const testRig = await rig({
    responses: [
      { match: "take your time", content: [{ type: "text", text: "slow reply" }], delayMs: 6000 },
      { match: "never answered", hang: true },
    ],
  });
  await plantRunning(testRig, "s-unheld", "t_unheld", "worker-gone");
  // A worker that takes a turn and then stops beating (a crash or a partition): its entry is gone
  // while its job stays active. It beats once a minute, so its entry does not come back meanwhile.
  testRig.worker({ workerId: "worker-doomed", concurrency: 1, heartbeatMs: 60_000 });
  const ui = await consoleFor(testRig);
  const { dash, page, errors } = ui;
  try {
    await page.goto(`${dash.url}#/workers`);
    // The doomed worker, alone, takes the first turn; then it stops beating (its entry removed, as its
    // expiry would), and the live worker starts.
    const doomed = page.locator('#worker-table tr[data-worker="worker-doomed"]');
    const stuck = await testRig.producer.enqueueTurn({ prompt: "never answered", cwd: testRig.ws });
    await doomed.locator(`a[href="#/session/${stuck.session}/turn/${stuck.turn}"]`).waitFor({ timeout: 30_000 });
    const entries = await testRig.redis.keys(`${testRig.space.logPrefix}{workers}:w:*`);
    for (const key of entries)
      if ((await testRig.redis.hget(key, "worker")) === "worker-doomed") await testRig.redis.del(key);
    // Beats often, so its entry says at once what it runs.
    testRig.worker({ workerId: "worker-live", concurrency: 2, heartbeatMs: 200 });
    const queued = await testRig.producer.enqueueTurn({ prompt: "take your time", cwd: testRig.ws });
    const live = page.locator('#worker-table tr[data-worker="worker-live"]');
    await live.locator(`a[href="#/session/${queued.session}/turn/${queued.turn}"]`).waitFor({ timeout: 30_000 });
    const orphan = page.locator(`#orphaned tr[data-session="${stuck.session}"]`);
    await orphan.waitFor({ timeout: 10_000 });
    assert.match(await orphan.innerText(), new RegExp(`${stuck.session} · ${stuck.turn}\\s+1\\s+worker-doomed`));
    assert.equal(await page.locator("#worker-table tbody tr").count(), 1, "only the live worker beats");
    assert.equal(await page.locator("#orphaned tbody tr").count(), 1);
    await page.locator('#unheld a[href="#/session/s-unheld"]').waitFor({ timeout: 10_000 });
    assert.equal(
      await page.locator(`#unheld a[href="#/session/${stuck.session}"]`).count(),
      0,
      "an active job holds it",
    );
    const slots = live.locator("svg.slots");
    await live.locator('svg.slots[data-busy="1"]').waitFor({ timeout: 10_000 });
    assert.equal(await slots.getAttribute("data-total"), "2");
    const widths = await slots
      .locator("rect")
      .evaluateAll((rects) => rects.map((r) => Number(r.getAttribute("width"))));
    assert.deepEqual(widths, [100, 50], "one slot of two drawn busy");
    assert.match(await live.innerText(), /1\/2/);
    await screenshot(page, "workers");

    assert.equal((await testRig.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 })).status, "finished");
    await live.locator("td.runs", { hasText: "idle" }).waitFor({ timeout: 15_000 });
    await live.locator('svg.slots[data-busy="0"]').waitFor({ timeout: 10_000 });
    assert.deepEqual(errors, []);
  } finally {
    await ui.close();
    await testRig.dispose();
  }
});
