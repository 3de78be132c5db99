// One real parked turn, started by `turnstream run --wait --supervised`, as every surface shows it:
// run --wait itself (stderr says what the turn waits on, its deadline and the decide command, and the
// wait goes on until the turn is decided and finishes), `turnstream pending` (PARKED with its age, the
// time left and the decide command; --json keeps the `parked` field), `turnstream sessions` and the
// projector's reducer (state parked, then running again and finished once decided), the parked-turn
// gauges scraped from the ops server's /metrics (counted parked until a worker resumes it, a pending
// decision until it is decided, never a job waiting to run), and `turnstream status` (parked turns
// counted with the oldest's age, never a "no worker" warning). The tests read the one turn in order,
// the read-only looks side by side.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Queue } from "bullmq";
import type { PendingRequest } from "../../src/decisions/index.ts";
import { silentLogger } from "../../src/kernel/index.ts";
import { fleetGauges, METRICS, prometheusName, startMetrics } from "../../src/metrics/index.ts";
import { startOpsServer } from "../../src/ops/index.ts";
import { fold } from "../../src/projector/index.ts";
import { createScrubber } from "../../src/telemetry/index.ts";
import type { TurnWorker } from "../../src/worker/index.ts";
import { rig, type Rig } from "../worker/_more.ts";
import { appendCall, decideParked, PARKING_WORKER, parkedRequest } from "../worker/_parked.ts";
import { onlyJson, startTurnstream, turnstream, type RunningCli } from "./_cli.ts";

/** The value of a gauge without attributes in a Prometheus exposition. */
function gaugeValue(text: string, def: Parameters<typeof prometheusName>[0]): number {
  const name = prometheusName(def);
  const line = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
  assert.ok(line, `${name} is exported`);
  return Number(line[1]);
}

const DECIDE_LINE = /^ {2}decide: {3}turnstream decide (\S+) (dr-\S+) allow\|deny$/m;

describe("a parked turn as the commands and the gauges show it", () => {
  let stage: Rig;
  let worker: TurnWorker;
  let env: Record<string, string>;
  let waiting: RunningCli;
  let parked: { session: string; turn: string; request: PendingRequest };
  let scrape: () => Promise<string>;
  let beforeParking: string;
  let startedAt: number;
  const closers: Array<() => Promise<void>> = [];

  before(async () => {
    stage = await rig((ws: string) => ({ responses: [appendCall("PARK-ME", join(ws, "ran.txt"))] }));
    closers.push(() => stage.dispose());
    worker = stage.worker(PARKING_WORKER);
    env = { TURNSTREAM_PREFIX: stage.space.logPrefix, TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix };

    const metrics = startMetrics({
      env: {},
      scrubber: createScrubber({ env: {} }),
      opsEndpoint: true,
      instanceId: "t",
    });
    const queue = new Queue("turns", { connection: stage.redis as never, prefix: stage.space.queuePrefix });
    fleetGauges(
      metrics.meter,
      { redis: stage.redis, logPrefix: stage.space.logPrefix, queue: queue as never },
      silentLogger,
    );
    const ops = await startOpsServer({ port: 0, metrics: metrics.prometheus, checks: [] });
    closers.push(async () => {
      await ops.close();
      await metrics.shutdown();
      await queue.close();
    });
    scrape = async () => (await fetch(`http://127.0.0.1:${ops.port}/metrics`)).text();
    beforeParking = await scrape();

    startedAt = Date.now();
    waiting = startTurnstream(
      ["run", "--wait", "--supervised", "--cwd", stage.ws, "--", "PARK-ME: append a line"],
      env,
    );
    closers.push(async () => {
      if (waiting.child.exitCode === null) waiting.child.kill();
    });
    await waiting.waitForOutput(DECIDE_LINE, 90_000);
    const [, session] = DECIDE_LINE.exec(waiting.stderr())!;
    const request = await parkedRequest(stage.redis, stage.space.logPrefix, session!);
    parked = { session: session!, turn: request.turn, request };
  });

  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  // Read-only looks at the parked turn, side by side; the tests after them change what it stands on.
  describe("while it is parked", { concurrency: true }, () => {
    test("run --wait: a parked turn is said on stderr with its call, deadline and decide command; the wait goes on", () => {
      const stderr = waiting.stderr();
      const [, session, requestId] = DECIDE_LINE.exec(stderr)!;
      assert.deepEqual([session, requestId], [parked.session, parked.request.requestId]);
      assert.match(
        stderr,
        new RegExp(
          `^turnstream run: turn ${parked.turn} parked: its Bash call waits for an operator's decision \\(request ${requestId}\\)$`,
          "m",
        ),
      );
      assert.match(stderr, /^ {2}call: {5}echo ran >> .*ran\.txt$/m);
      assert.match(stderr, /^ {2}deadline: \d{4}-\d\d-\d\dT\S+Z \([78]h\d\dm left; denied unless decided before\)$/m);
      assert.match(stderr, /still waiting, holding nothing meanwhile/);
      assert.equal(waiting.child.exitCode, null, "still waiting");
    });

    test("pending: a parked request says PARKED with its age, the time to its deadline in hours and minutes, and the decide command", async () => {
      const { session, request } = parked;
      const [text, json] = await Promise.all([turnstream(["pending"], env), turnstream(["pending", "--json"], env)]);
      assert.equal(text.code, 0, text.stderr);
      const head = new RegExp(
        `^${session} ${request.requestId} Bash \\[exec\\] PARKED \\d+s, [78]h\\d\\dm left \\(deadline ${request.expiresAt.replaceAll(".", "\\.")}\\)$`,
        "m",
      );
      assert.match(text.stdout, head);
      assert.match(text.stdout, /^ {4}command: echo ran >> .*ran\.txt$/m);
      assert.match(
        text.stdout,
        new RegExp(`^ {4}decide: {2}turnstream decide ${session} ${request.requestId} allow\\|deny$`, "m"),
      );
      assert.doesNotMatch(text.stdout, /\d{3,}s left/, "no raw seconds for a deadline hours away");

      const listed = JSON.parse(json.stdout) as PendingRequest[];
      const mine = listed.find((p) => p.requestId === request.requestId);
      assert.equal(mine?.status, "parked");
      assert.equal(mine?.parked?.queue, "turns");
      assert.equal(typeof mine?.parked?.seq, "number");
      assert.equal(mine?.parked?.decided, undefined);
    });

    test("sessions and the read model: the session and its turn are parked, its request parked and pending", async () => {
      const { session, turn, request } = parked;
      const state = fold(await stage.events(session));
      assert.equal(state.view.status, "parked");
      const turnView = state.view.turns.find((t) => t.id === turn)!;
      assert.equal(turnView.status, "parked");
      assert.deepEqual(
        turnView.attempts.map((a) => a.status),
        ["parked"],
      );
      assert.deepEqual(
        state.decisions.requests.map((r) => [r.requestId, r.status]),
        [[request.requestId, "parked"]],
      );
      assert.deepEqual(state.decisions.pending, [request.requestId]);

      // No projector runs here: the command folds the log with the same reducer. Its columns: session,
      // status, turns, cost, last activity, events, pending decisions, tenant.
      const listed = await turnstream(["sessions"], env);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, new RegExp(`^${session} +parked +1 +\\$\\d\\.\\d{4} .* 1 +-$`, "m"));
    });

    test("fleet gauges: the parked turn is counted with its age and its request as a pending decision; its job is not waiting to run", async () => {
      assert.equal(gaugeValue(beforeParking, METRICS.turnsParked), 0, "nothing parked before the turn started");
      assert.equal(gaugeValue(beforeParking, METRICS.turnsOldestParkedAge), 0);
      const text = await scrape();
      assert.equal(gaugeValue(text, METRICS.turnsParked), 1);
      const age = gaugeValue(text, METRICS.turnsOldestParkedAge);
      assert.ok(age > 0 && age <= (Date.now() - startedAt) / 1000, `age ${age} s`);
      assert.equal(gaugeValue(text, METRICS.decisionsPending), 1, "its request waits for an operator");
      assert.equal(gaugeValue(text, METRICS.queueOldestWaitAge), 0, "a parked turn's job is not waiting to run");
    });
  });

  test("status: parked turns are counted with the oldest's age; with no worker they raise no warning, a waiting turn still does", async () => {
    const { turn } = parked;
    const live = await turnstream(["status", "--json"], env);
    assert.equal(live.code, 0, live.stderr);
    const report = onlyJson(live.stdout);
    assert.equal(report["parkedTurns"], 1);
    assert.equal(report["parkedDecided"], 0);
    assert.ok(Number(report["oldestParkedAgeMs"]) > 0 && Number(report["oldestParkedAgeMs"]) < 120_000);
    assert.equal(report["oldestWaitingAgeMs"], null);

    // The worker goes, and the parked turn's job is woken as a decision would wake it: it waits in the
    // queue with no worker to take it, yet it waits for its decision, not for a worker.
    await worker.close({ graceMs: 1000 });
    await stage.producer.order.promote(turn);
    const strict = await turnstream(["status", "--strict"], env);
    assert.equal(strict.code, 0, strict.stdout);
    assert.match(strict.stdout, /^queue: 1 waiting, /m, "the woken parked turn's job waits");
    assert.match(strict.stdout, /^oldest waiting turn: none$/m, "a parked turn is not a turn waiting to run");
    assert.match(strict.stdout, /^parked turns: 1, the oldest waiting \d+s for a decision/m);
    assert.match(strict.stdout, /^workers: 0$/m);
    assert.doesNotMatch(strict.stdout, /warning/);

    await stage.producer.enqueueTurn({ prompt: "plain turn", cwd: stage.ws });
    const warned = await turnstream(["status", "--json", "--strict"], env);
    assert.equal(warned.code, 3, warned.stdout);
    const both = onlyJson(warned.stdout);
    assert.match(String((both["warnings"] as string[])[0]), /^1 turn\(s\) wait to run and no worker heartbeats/);
    assert.equal(both["parkedTurns"], 1);
    assert.ok(Number(both["oldestWaitingAgeMs"]) < Number(both["oldestParkedAgeMs"]), "the oldest is the plain turn");
  });

  test("decided with no worker up, it still counts as parked but no longer as a pending decision; a new worker resumes it: running again, then finished, its parked attempt kept in the conversation, and run --wait ends", async () => {
    const { session, turn, request } = parked;
    await worker.close({ graceMs: 1000 });
    const undecided = gaugeValue(await scrape(), METRICS.turnsOldestParkedAge);
    await decideParked(stage, request, "allow");
    const decided = await scrape();
    assert.equal(gaugeValue(decided, METRICS.turnsParked), 1);
    assert.ok(gaugeValue(decided, METRICS.turnsOldestParkedAge) >= undecided);
    assert.equal(gaugeValue(decided, METRICS.decisionsPending), 0);

    worker = stage.worker(PARKING_WORKER);
    const result = await stage.producer.waitForTurn(turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished");
    const ran = join(stage.ws, "ran.txt");
    assert.deepEqual(existsSync(ran) ? readFileSync(ran, "utf8").trim().split("\n") : [], ["ran"]);
    assert.equal((await waiting.exited).code, 0, waiting.stderr());
    assert.match(waiting.stdout(), /· parked, attempt 1/, "the progress line says parked");
    assert.match(waiting.stdout(), /result \(finished\): /);

    const events = await stage.events(session);
    const resumedAt = events.findIndex((e) => e.kind === "attempt.started" && e.turn === turn && e.attempt === 2);
    assert.ok(resumedAt > 0, "a second attempt resumed the turn");
    const resumed = fold(events.slice(0, resumedAt + 1));
    assert.equal(resumed.view.turns.find((t) => t.id === turn)?.status, "running", "attempt.started: running again");

    const state = fold(events);
    const turnView = state.view.turns.find((t) => t.id === turn)!;
    assert.equal(turnView.status, "finished");
    assert.deepEqual(
      turnView.attempts.map((a) => a.status),
      ["parked", "finished"],
      "the parked attempt is not superseded",
    );
    // The deferred call ran in the resumed run: its result goes with the call the parked run made.
    const [first, second] = state.transcript.turns.find((t) => t.turn === turn)!.attempts;
    const call = first!.items.find((item) => item.t === "tool");
    assert.equal(call?.t === "tool" && call.result !== null && !call.result.isError, true, JSON.stringify(call));
    assert.ok(!second!.items.some((item) => item.t === "orphan_result"), "no result left without its call");
    assert.deepEqual(
      state.decisions.requests.map((r) => [r.status, r.decision]),
      [["decided", "allow"]],
    );
    assert.deepEqual(state.decisions.pending, []);
    assert.equal(onlyJson((await turnstream(["status", "--json"], env)).stdout)["parkedTurns"], 0);
    const resumedGauges = await scrape();
    assert.equal(gaugeValue(resumedGauges, METRICS.turnsParked), 0, "resumed, it is parked no more");
    assert.equal(gaugeValue(resumedGauges, METRICS.turnsOldestParkedAge), 0);
  });
});
