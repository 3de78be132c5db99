// What a turn cost, with the real CLI, cold and warm. The CLI's total_cost_usd is its CLI session's
// running total: three identical turns of one session read about $0.000168, $0.000336, $0.000504 (a
// kept process counts in memory; a new one goes on from the cost its exiting predecessor wrote into
// the session file, or from 0 when the file has none). Each turn must count what it added (the same
// for identical turns), the session what it spent: in turn.finished, the read model's fold, replay,
// `turnstream sessions`, the dashboard and the cost metric. Checked against the CLI's own per-result
// figure (model_usage_since_last_result), a count that does not go through the running total.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import type { Envelope } from "../../src/log/index.ts";
import { METRICS, startMetrics } from "../../src/metrics/index.ts";
import { metricsObserver } from "../../src/metrics/worker.ts";
import { fold, replaySession } from "../../src/projector/index.ts";
import { startDashboard } from "../../src/dashboard/index.ts";
import { createScrubber } from "../../src/telemetry/index.ts";
import { onlyJson, turnstream } from "../bin/_cli.ts";
import { restoredCostTotal } from "../../src/worker/snapshots.ts";
import { cliLines, dataOf, rig, type Rig } from "./_more.ts";

const close = (a: number, b: number): boolean => Math.abs(a - b) < 1e-12;
const near = (a: number, b: number, what: string): void => assert.ok(close(a, b), `${what}: ${a} vs ${b}`);

interface TurnFigures {
  total: number;
  /** The result's usage: the turn's own tokens. */
  tokens: { input: number; output: number };
  ownFigure: number;
  finishedCost: number;
  started: Record<string, unknown>;
}

/**
 * The result line's total and the CLI's own per-result cost (model_usage_since_last_result) of a turn's single attempt.
 */
function figuresOf(events: Envelope[]): TurnFigures {
  const results = cliLines(events, 1).filter((l) => l["type"] === "result");
  assert.equal(results.length, 1);
  const resultLine = results[0]!;
  const since = resultLine["model_usage_since_last_result"] as Record<string, { costUSD: number }>;
  const finished = events.find((e) => e.kind === "turn.finished");
  assert.ok(finished !== undefined, "the turn finished");
  const usage = resultLine["usage"] as { input_tokens: number; output_tokens: number };
  return {
    total: resultLine["total_cost_usd"] as number,
    tokens: { input: usage.input_tokens, output: usage.output_tokens },
    ownFigure: Object.values(since).reduce((n, m) => n + m.costUSD, 0),
    finishedCost: dataOf(finished)["costUsd"] as number,
    started: dataOf(events.find((e) => e.kind === "attempt.started")!),
  };
}

async function metricCost(metrics: ReturnType<typeof startMetrics>, exporter: InMemoryMetricExporter): Promise<number> {
  await metrics.forceFlush();
  const points = exporter
    .getMetrics()
    .at(-1)!
    .scopeMetrics.flatMap((s) => s.metrics)
    .filter((m) => m.descriptor.name === METRICS.cost.name)
    .flatMap((m) => m.dataPoints as Array<{ value: unknown }>);
  return points.reduce((n, p) => n + (p.value as number), 0);
}

/** What the surfaces that read the log say the session and its turns cost. */
async function surfaces(
  stage: Rig,
  session: string,
): Promise<{
  fold: number[];
  tokens: { input: number; output: number }[];
  replay: number;
  sessions: number;
  dashboard: number;
  dashboardTurns: number[];
}> {
  const events = await stage.events(session);
  const folded = fold(events);
  const replayed = await replaySession(stage.producer.log, session);
  const env = { TURNSTREAM_PREFIX: stage.space.logPrefix, TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix };
  const listed = await turnstream(["sessions", "--json"], env);
  assert.equal(listed.code, 0, listed.stderr);
  const row = onlyJson(listed.stdout);
  assert.equal(row["id"] ?? row["session"], session);
  const dash = await startDashboard({
    redis: stage.redis,
    prefix: stage.space.logPrefix,
    queuePrefix: stage.space.queuePrefix,
  });
  try {
    const page = (await (await fetch(`${dash.url}api/sessions/${session}?until=${events.at(-1)!.seq}`)).json()) as {
      view: { costUsd: number; turns: Array<{ attempts: Array<{ costUsd: number }> }> };
    };
    return {
      fold: [folded.view.costUsd, ...folded.view.turns.map((t) => t.attempts.reduce((n, a) => n + a.costUsd, 0))],
      tokens: folded.view.turns.map((turn) => ({
        input: turn.attempts[0]!.tokens.input,
        output: turn.attempts[0]!.tokens.output,
      })),
      replay: replayed.view.costUsd,
      sessions: row["costUsd"] as number,
      dashboard: page.view.costUsd,
      // As the session page adds them up per turn.
      dashboardTurns: page.view.turns.map((t) => t.attempts.reduce((n, a) => n + a.costUsd, 0)),
    };
  } finally {
    await dash.close();
  }
}

/**
 * Three identical turns of one session, each in warm mode or not as `warm` says. `bases` gives, per
 * turn, where its CLI session's count should stand when it starts, from the turns' result totals.
 */
async function threeIdenticalTurns(
  warm: boolean[],
  bases: (totals: number[]) => (number | undefined)[],
): Promise<TurnFigures[]> {
  const stage = await rig({ responses: [] });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 600_000 });
  const scrubber = createScrubber({ env: {} });
  const metrics = startMetrics({
    env: {},
    scrubber,
    opsEndpoint: false,
    instanceId: "cost-test",
    reader: reader as never,
  });
  try {
    stage.worker({ observers: [metricsObserver(metrics.meter, scrubber)] });
    let session: string | undefined;
    const turns: TurnFigures[] = [];
    for (const keepWarm of warm) {
      const queued = await stage.producer.enqueueTurn({
        prompt: "the same question",
        cwd: stage.ws,
        session,
        options: { warm: keepWarm },
      });
      session = queued.session;
      assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 })).status, "finished");
      turns.push(figuresOf(await stage.events(queued.session, queued.turn)));
    }
    const first = turns[0]!;
    assert.ok(first.total > 0);
    const expectedBases = bases(turns.map((t) => t.total));
    for (const [index, figures] of turns.entries()) {
      near(figures.ownFigure, first.ownFigure, `the CLI's own figure of turn ${index + 1}`);
      near(figures.finishedCost, figures.ownFigure, `turn.finished.costUsd of turn ${index + 1}`);
      const base = expectedBases[index];
      if (base === undefined)
        assert.equal(figures.started["costBaseUsd"], undefined, `turn ${index + 1} starts a fresh count`);
      else near(figures.started["costBaseUsd"] as number, base, `attempt.started.costBaseUsd of turn ${index + 1}`);
    }
    const spent = 3 * first.ownFigure;
    const seen = await surfaces(stage, session!);
    near(seen.fold[0]!, spent, "the read model's session cost");
    for (const [index, turnCost] of seen.fold.slice(1).entries())
      near(turnCost, first.ownFigure, `the read model's turn ${index + 1}`);
    // Tokens were per turn already: each result's usage is the turn's own, the same for identical turns.
    assert.deepEqual(
      seen.tokens,
      turns.map((t) => t.tokens),
    );
    assert.deepEqual(
      seen.tokens,
      turns.map(() => first.tokens),
    );
    near(seen.replay, spent, "replay");
    near(seen.sessions, spent, "turnstream sessions --json");
    near(seen.dashboard, spent, "the dashboard's session cost");
    for (const [index, turnCost] of seen.dashboardTurns.entries())
      near(turnCost, first.ownFigure, `the dashboard's turn ${index + 1}`);
    near(await metricCost(metrics, exporter), spent, "the cost metric");
    return turns;
  } finally {
    await metrics.shutdown();
    await stage.dispose();
  }
}

test("cold: three identical turns of one session each cost the same, the session what its CLI session spent", async () => {
  const turns = await threeIdenticalTurns([false, false, false], (t) => [undefined, t[0], t[1]]);
  assert.deepEqual(
    turns.map((t) => t.started["warm"]),
    [undefined, undefined, undefined],
  );
  // The measurement this rests on: a cold resume goes on from the total its session file holds.
  near(turns[2]!.total, 3 * turns[0]!.total, "the CLI reports the session's running total");
});

test("warm: three identical turns on one kept CLI process each cost the same, the session what it spent", async () => {
  const turns = await threeIdenticalTurns([true, true, true], (t) => [undefined, t[0], t[1]]);
  assert.deepEqual(
    turns.map((t) => t.started["warm"]),
    ["none", "warm", "warm"],
  );
  near(turns[2]!.total, 3 * turns[0]!.total, "the kept process reports the session's running total");
});

test("warm then cold: a file saved while its process lived on holds no cost, so the next process counts from 0", async () => {
  // The CLI writes its session's cost into the file when its process exits: a warm turn's snapshot
  // (taken at its result, the process kept) has none, a cold turn's has it.
  const turns = await threeIdenticalTurns([true, false, false], (t) => [undefined, 0, t[1]]);
  near(turns[1]!.total, turns[0]!.total, "turn 2's CLI counted from 0");
  near(turns[2]!.total, 2 * turns[0]!.total, "turn 3's went on from turn 2's file");
});

test("the cost a session file holds: its CLI session's last cost-state line; another session's, a broken line or a quoted one do not count", () => {
  const line = (o: unknown): string => JSON.stringify(o);
  const file = (lines: string[]): Buffer => Buffer.from(lines.join("\n") + "\n");
  const state = (sessionId: string, totalCostUSD: unknown) => line({ type: "cost-state", sessionId, totalCostUSD });
  const quoted = line({
    type: "user",
    message: { content: `${"{"}"type":"cost-state","sessionId":"s1","totalCostUSD":99}` },
  });
  assert.equal(restoredCostTotal(file([state("s1", 0.1), state("s1", 0.3), state("s2", 7)]), "s1"), 0.3);
  assert.equal(
    restoredCostTotal(file([state("s1", 0.1), quoted, '{"type":"cost-state","sessionId":"s1",broken']), "s1"),
    0.1,
  );
  assert.equal(restoredCostTotal(file([state("s2", 7)]), "s1"), 0, "none for this session: the CLI counts from 0");
  assert.equal(restoredCostTotal(file([state("s1", "lots")]), "s1"), 0);
  assert.equal(restoredCostTotal(Buffer.from(state("s1", 0.5)), "s1"), 0.5, "the last line without a newline");
});
