// kill -9 of a worker holding a session's warm CLI process: the dead worker's watchdog ends the kept
// tree (no orphan CLI), and the session's next turn runs cold on the other worker once the dead
// owner's hand-off window has passed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { orderKeys } from "../../src/queue/index.ts";
import { processFleet, readAll, treeMembers, waitUntil } from "../worker/_support.ts";

test("kill -9 of a worker with a warm session: its kept CLI tree ends, the next turn runs cold on the other worker", async () => {
  const fleet = await processFleet({ responses: [] });
  const { producer, ws } = fleet;
  const env = { TURNSTREAM_SANDBOXED: "1", TURNSTREAM_WARM: "1" };
  try {
    const workers = { a: await fleet.start("a", env), b: await fleet.start("b", env) };
    const first = await producer.enqueueTurn({ prompt: "first", cwd: ws });
    assert.equal((await producer.waitForTurn(first.turn, { timeoutMs: 40_000 })).status, "finished");
    const events = await readAll(producer.log, first.session);
    const started = events.find((e) => e.kind === "attempt.started")!.data as Record<string, unknown>;
    assert.equal(started["warm"], "none");
    const cliPid = Number((events.find((e) => e.kind === "cli.exit")!.data as Record<string, unknown>)["pid"]);
    const marker = /TURNSTREAM_TREE=([0-9a-f-]+)/.exec(readFileSync(`/proc/${cliPid}/environ`, "latin1"))![1]!;
    assert.ok(treeMembers(marker).length > 0, "the CLI is kept after its turn");
    // The kill comes once the worker has also let go of the session (the turn's record is written
    // first): a worker killed between the two leaves the next turn waiting out its lease, a different case.
    const order = orderKeys(fleet.space.logPrefix, first.session);
    await waitUntil(
      async () => (await fleet.redis.exists(order.turns, order.lease)) === 0,
      10_000,
      "the session let go",
    );
    const victim = String(started["worker"]).includes(`-${workers.a.pid}-`) ? "a" : "b";
    const survivor = victim === "a" ? "b" : "a";
    workers[victim].kill("SIGKILL");
    await workers[victim].exited;
    await waitUntil(() => treeMembers(marker).length === 0, 15_000, "the dead worker's kept CLI tree to be gone");

    const next = await producer.enqueueTurn({ prompt: "second", cwd: ws, session: first.session });
    const res = await producer.waitForTurn(next.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const s2 = (await readAll(producer.log, first.session)).find(
      (e) => e.turn === next.turn && e.kind === "attempt.started",
    )!.data as Record<string, unknown>;
    assert.match(String(s2["worker"]), new RegExp(`-${workers[survivor].pid}-`));
    assert.equal(s2["warm"], "none", "a new process on the survivor");
    assert.equal(typeof s2["snapshotSeq"], "number", "started from the session's snapshot");
  } finally {
    await fleet.dispose();
  }
});
