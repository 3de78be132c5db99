// kill -9 of the worker process while its CLI's Bash tool runs a slow sleep: the other worker takes
// the turn over after the lock and lease lapse, under a new epoch; the dead worker's watchdog ends
// the old tree; the log shows attempt 1 abandoned and attempt 2 complete.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { findTreeProcess } from "../worker/_more.ts";
import { processFleet, readAll, treeMembers, waitUntil } from "../worker/_support.ts";

// Workers whose lease and job lock lapse within seconds (library options), so the takeover is quick.
const QUICK_FAILOVER = join(import.meta.dirname, "_quick-failover-worker.ts");

test("kill -9 of a worker mid-Bash: another worker completes the turn, the dead tree is gone, attempt 1 abandoned", async () => {
  const fleet = await processFleet({
    responses: [
      {
        content: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "echo begin; sleep 37; echo slept", description: "wait" },
          },
        ],
      },
      { content: [{ type: "text", text: "recovered" }] },
    ],
  });
  const { space, producer, ws } = fleet;
  const env = { TURNSTREAM_SANDBOXED: "1" };
  try {
    const workers = { a: await fleet.start("a", env, QUICK_FAILOVER), b: await fleet.start("b", env, QUICK_FAILOVER) };
    const queued = await producer.enqueueTurn({
      prompt: "run the slow command",
      cwd: ws,
      options: { skipPermissions: true },
    });
    let sleep: ReturnType<typeof findTreeProcess>;
    await waitUntil(
      () => (sleep = findTreeProcess("sleep 37", space.root)) !== undefined,
      30000,
      "the Bash tool's sleep to start",
    ).catch(async (err: unknown) => {
      const seen = (await readAll(producer.log, queued.session)).map(
        (e) => `${e.kind}:${JSON.stringify(e.data).slice(0, 200)}`,
      );
      throw new Error(`${(err as Error).message}; log: ${seen.join(" | ")}`);
    });
    const victim = sleep!.env.includes(`${space.root}/root-a/`) ? "a" : "b";
    const survivor = victim === "a" ? "b" : "a";
    workers[victim].kill("SIGKILL");
    await workers[victim].exited;

    const result = await producer.waitForTurn(queued.turn, { timeoutMs: 60000 });
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    assert.equal(result.attempt, 2);
    assert.equal(result.resultText, "recovered");
    await waitUntil(() => treeMembers(sleep!.marker).length === 0, 15000, "the dead worker's CLI tree to be gone");

    const events = (await readAll(producer.log, queued.session)).filter((e) => e.turn === queued.turn);
    const started = events.filter((e) => e.kind === "attempt.started");
    assert.deepEqual(
      started.map((e) => e.attempt),
      [1, 2],
    );
    assert.ok(started[1]!.epoch > started[0]!.epoch, "attempt 2 runs under a newer epoch");
    assert.match(
      String((started[1]!.data as Record<string, unknown>)["worker"]),
      new RegExp(`-${workers[survivor].pid}-`),
    );
    const abandoned = events.filter((e) => e.kind === "attempt.abandoned");
    assert.equal(abandoned.length, 1);
    assert.equal((abandoned[0]!.data as Record<string, unknown>)["attempt"], 1);
    assert.equal((abandoned[0]!.data as Record<string, unknown>)["reason"], "worker_crashed");
    const iAbandoned = events.indexOf(abandoned[0]!);
    assert.ok(iAbandoned < events.indexOf(started[1]!), "recorded before attempt 2 started");
    // The accepted attempt's lines: a complete run, each line once, all inside the attempt.
    const accepted = events
      .filter((e) => e.attempt === 2 && e.kind === "cli.line")
      .map((e) => String((e.data as { raw: string }).raw));
    assert.equal(new Set(accepted).size, accepted.length, "no duplicated line");
    const types = accepted.map((l) => (JSON.parse(l) as { type: string }).type);
    assert.ok(types.includes("system") && types.at(-1) === "result", types.join(","));
    assert.equal(types.filter((x) => x === "result").length, 1);
    const seqs = events.filter((e) => e.attempt === 2).map((e) => e.seq);
    assert.deepEqual(
      seqs,
      seqs.map((_, i) => seqs[0]! + i),
      "attempt 2's events are contiguous: nothing missing",
    );
    assert.equal(events.at(-1)!.kind, "turn.finished");
  } finally {
    await fleet.dispose();
  }
});
