// `turnstream status` against real Redis and BullMQ: turns waiting on no live worker raise a warning
// (text and --json, and exit 3 under --strict) with the oldest turn's age; a worker that heartbeats is
// listed with its slots and the warning goes. `turnstream sessions` without a projector shows a real
// turn's figures folded from the log; that turn runs warm, and status lists its kept process.
import { test } from "node:test";
import assert from "node:assert/strict";
import { rig } from "../worker/_more.ts";
import { waitFor } from "../decisions/_support.ts";
import { turnstream, onlyJson } from "./_cli.ts";

// A type alias rather than an interface, so `as StatusJson` may narrow the record `onlyJson` returns.
type StatusJson = {
  counts: Record<string, number>;
  oldestWaitingAgeMs: number | null;
  workers: {
    id: string;
    worker: string;
    slotsBusy: number;
    slotsTotal: number;
    warmKept: number;
    heartbeatAgeMs: number;
    pid: number;
  }[];
  running: unknown[];
  warnings: string[];
};

test("status: waiting turns and no worker → a warning and the oldest turn's age; a live worker → listed with its slots, no warning", async () => {
  const stage = await rig({ responses: [] });
  const env = { TURNSTREAM_PREFIX: stage.space.logPrefix, TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix };
  try {
    const before = Date.now();
    await stage.producer.enqueueTurn({ prompt: "first", cwd: stage.ws });
    await new Promise((res) => setTimeout(res, 1100));
    await stage.producer.enqueueTurn({ prompt: "second", cwd: stage.ws });
    const text = await turnstream(["status"], env);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /queue: 2 waiting/);
    assert.match(text.stdout, /workers: 0/);
    assert.match(text.stdout, /oldest waiting turn: queued \d+s ago/);
    assert.match(
      text.stdout,
      /^warning: 2 turn\(s\) wait to run and no worker heartbeats under key prefix "tw[0-9a-f]+:".*start a worker \(`turnstream worker`\)/m,
    );

    const json = await turnstream(["status", "--json"], env);
    assert.equal(json.code, 0, json.stderr);
    const report = onlyJson(json.stdout) as StatusJson;
    assert.equal(report.counts["waiting"], 2);
    assert.deepEqual(report.workers, []);
    assert.equal(report.warnings.length, 1);
    assert.match(report.warnings[0]!, /no worker heartbeats/);
    // The first turn was queued before the second, which waited over a second to be queued.
    assert.ok(
      report.oldestWaitingAgeMs !== null && report.oldestWaitingAgeMs >= 1000,
      `oldest age ${report.oldestWaitingAgeMs}`,
    );
    assert.ok(
      report.oldestWaitingAgeMs <= Date.now() - before,
      `oldest age ${report.oldestWaitingAgeMs} within the test's run`,
    );
    const strict = await turnstream(["status", "--strict"], env);
    assert.equal(strict.code, 3, "--strict exits 3 on a warning");

    // A worker of another queue under the same prefix serves none of these turns.
    const elsewhere = stage.worker({ autorun: false, queueName: "elsewhere", instanceId: "status-elsewhere" });
    await elsewhere.ready();
    const stillStrict = await turnstream(["status", "--strict", "--json"], env);
    assert.equal(stillStrict.code, 3, "a worker of another queue does not serve this one");
    assert.deepEqual((onlyJson(stillStrict.stdout) as StatusJson).workers, []);
    const other = onlyJson((await turnstream(["status", "--json", "--queue", "elsewhere"], env)).stdout) as StatusJson;
    assert.deepEqual(
      other.workers.map((worker) => worker.id),
      ["status-elsewhere"],
    );
    await elsewhere.close({ graceMs: 0 });

    // A worker that heartbeats but takes no job: the turns still wait, on a live worker now.
    const idleWorker = stage.worker({
      autorun: false,
      concurrency: 3,
      instanceId: "status-inst",
      workerId: "w-status",
    });
    await idleWorker.ready();
    const live = onlyJson((await turnstream(["status", "--json", "--strict"], env)).stdout) as StatusJson;
    assert.deepEqual(live.warnings, []);
    assert.equal(live.counts["waiting"], 2);
    assert.equal(live.workers.length, 1);
    const [onlyWorker] = live.workers;
    assert.deepEqual(
      [
        onlyWorker!.id,
        onlyWorker!.worker,
        onlyWorker!.slotsBusy,
        onlyWorker!.slotsTotal,
        onlyWorker!.warmKept,
        onlyWorker!.pid,
      ],
      ["status-inst", "w-status", 0, 3, 0, process.pid],
    );
    assert.ok(
      onlyWorker!.heartbeatAgeMs >= 0 && onlyWorker!.heartbeatAgeMs < 15_000,
      `heartbeat age ${onlyWorker!.heartbeatAgeMs}`,
    );
    const liveText = await turnstream(["status", "--strict"], env);
    assert.equal(liveText.code, 0, liveText.stderr);
    assert.match(
      liveText.stdout,
      /workers: 1\n {2}status-inst \(w-status, host \S+, pid \d+, v\S+\): 0\/3 slots busy, 0 warm kept, heartbeat \d+s ago/,
    );
    assert.doesNotMatch(liveText.stdout, /warning:/);

    // Closed cleanly, the worker is gone from the registry at once, and the warning is back.
    await idleWorker.close({ graceMs: 1000 });
    const gone = onlyJson((await turnstream(["status", "--json"], env)).stdout) as StatusJson;
    assert.deepEqual([gone.workers.length, gone.warnings.length], [0, 1]);
  } finally {
    await stage.dispose();
  }
});

test("sessions without a projector: a real turn's count, cost and last activity folded from the log; --fold-limit bounds it; status lists the warm process the turn left", async () => {
  const stage = await rig({
    responses: [{ content: [{ type: "text", text: "done" }], usage: { input_tokens: 1200, output_tokens: 300 } }],
  });
  const env = { TURNSTREAM_PREFIX: stage.space.logPrefix };
  try {
    stage.worker({ instanceId: "warm-inst", heartbeatMs: 200 });
    const enqueued = await stage.producer.enqueueTurn({ prompt: "say done", cwd: stage.ws, options: { warm: true } });
    const result = await stage.producer.waitForTurn(enqueued.turn, { session: enqueued.session, timeoutMs: 90_000 });
    assert.equal(result.status, "finished");
    const events = await stage.events(enqueued.session);
    const finished = events.find((e) => e.kind === "turn.finished");
    assert.ok(finished, "the turn finished");
    const cost = (finished.data as { costUsd: number }).costUsd;
    assert.ok(typeof cost === "number" && cost > 0, `the turn reported a cost (${cost})`);
    // The worker may append after turn.finished (nothing should follow it, but read the log's end).
    const last = events.at(-1)!;

    const json = await turnstream(["sessions", "--json"], env);
    assert.equal(json.code, 0, json.stderr);
    const row = onlyJson(json.stdout);
    assert.equal(row["session"], enqueued.session);
    assert.equal(row["source"], "log");
    assert.equal(row["status"], "finished");
    assert.equal(row["turns"], 1);
    assert.equal(row["costUsd"], cost);
    assert.equal(row["lastActivity"], last.at);
    assert.equal(row["lastSeq"], last.seq);
    assert.equal(row["projectedSeq"], null);

    const table = await turnstream(["sessions"], env);
    assert.match(
      table.stdout,
      new RegExp(
        `${enqueued.session}\\s+\\S+\\s+1\\s+\\$${cost.toFixed(4).replace(".", "\\.")}\\s+${last.at.replace(/[.]/g, "\\.")}`,
      ),
    );

    const bounded = onlyJson(
      (await turnstream(["sessions", "--json", "--fold-limit", String(last.seq - 1)], env)).stdout,
    );
    assert.deepEqual(
      [bounded["source"], bounded["turns"], bounded["costUsd"], bounded["lastActivity"]],
      ["meta", null, null, null],
    );
    const bad = await turnstream(["sessions", "--fold-limit", "lots"], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--fold-limit takes a whole number of events/);

    // The worker kept the session's CLI process; a beat after the turn says so.
    const statusEnv = { ...env, TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix };
    const kept = await waitFor(async () => {
      const report = onlyJson((await turnstream(["status", "--json"], statusEnv)).stdout) as StatusJson;
      return report.workers.find((w) => w.id === "warm-inst" && w.warmKept === 1);
    }, 15_000);
    assert.equal(kept.slotsBusy, 0);
    assert.match((await turnstream(["status"], statusEnv)).stdout, /warm-inst \(.*\): 0\/\d+ slots busy, 1 warm kept,/);
  } finally {
    await stage.dispose();
  }
});
