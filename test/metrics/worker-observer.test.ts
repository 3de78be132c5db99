// The worker's event observer alone, fed the lines of a recorded run: no worker, no Redis.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { createScrubber } from "../../src/telemetry/index.ts";
import { METRICS, startMetrics } from "../../src/metrics/index.ts";
import { metricsObserver } from "../../src/metrics/worker.ts";
import { isKnown, parseLine } from "../../src/protocol/index.ts";

test("cost: a run's results repeat the process's running total, which is counted once", async () => {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 600_000 });
  const scrubber = createScrubber({ env: {} });
  const metrics = startMetrics({
    env: {},
    scrubber,
    opsEndpoint: false,
    instanceId: "observer-test",
    reader: reader as never,
  });
  try {
    // A run with a background subagent: two result lines, both with the process's total so far.
    const raws = readFileSync(new URL("../fixtures/cli/background-subagent.jsonl", import.meta.url), "utf8")
      .split("\n")
      .filter((l) => l !== "");
    const parsed = raws.map(parseLine);
    const totals = parsed
      .filter((p) => isKnown(p, "result"))
      .map((p) => (p.line as { total_cost_usd: number }).total_cost_usd);
    assert.equal(totals.length, 2);
    assert.equal(totals[0], totals[1], "the recorded run prints the same total twice");

    const ctx = {
      session: "s1",
      turn: "t1",
      attempt: 1,
      epoch: 1,
      traceparent: undefined,
      requestModel: "claude-test-1",
      startedAt: new Date().toISOString(),
      scrub: (t: string) => t,
    };
    const observer = metricsObserver(metrics.meter, scrubber).attempt(ctx)!;
    const base = { session: "s1", turn: "t1", attempt: 1, epoch: 1, at: new Date().toISOString() };
    observer.onEvent({ ...base, kind: "attempt.started", data: {} });
    raws.forEach((raw, i) => observer.onEvent({ ...base, kind: "cli.line", data: { raw } }, parsed[i]));
    // A later result with a higher total adds only the rise.
    const more = JSON.parse(raws.findLast((l) => l.includes('"type":"result"'))!) as Record<string, unknown>;
    more["total_cost_usd"] = totals[0]! + 0.5;
    const moreRaw = JSON.stringify(more);
    observer.onEvent({ ...base, kind: "cli.line", data: { raw: moreRaw } }, parseLine(moreRaw));
    observer.onEvent({ ...base, kind: "turn.finished", data: {} });

    await metrics.forceFlush();
    const points = exporter
      .getMetrics()
      .at(-1)!
      .scopeMetrics.flatMap((s) => s.metrics)
      .filter((m) => m.descriptor.name === METRICS.cost.name)
      .flatMap((m) => m.dataPoints as Array<{ attributes: Record<string, unknown>; value: unknown }>);
    assert.equal(points.length, 1);
    // The turn names no tenant.
    assert.deepEqual(points[0]!.attributes, { "gen_ai.request.model": "claude-test-1", "turnstream.tenant": "none" });
    assert.ok(
      Math.abs((points[0]!.value as number) - (totals[0]! + 0.5)) < 1e-12,
      `cost counted ${String(points[0]!.value)}, the run's total is ${totals[0]! + 0.5}`,
    );
  } finally {
    await metrics.shutdown();
  }
});
