// The CLI's own metrics as the worker's instruments, and the worker's CLI telemetry receiver's counts.
// The receiver has already passed every point through the allow-list (src/telemetry/cli-otlp/metrics.ts):
// what reaches `add` names one of the instruments below, with attributes from their closed sets. The
// receiver's counts (spans forwarded and refused, posts without a live token, metric points by what
// became of them) are read when a reader collects, so an operator sees forged posts.
import type { BatchObservableResult, Counter, Meter } from "@opentelemetry/api";
import type { CliInstrument, CliMetricsSink, CliOtlpStats } from "../telemetry/index.ts";
import { counter, observableCounter } from "./instruments.ts";
import { METRICS } from "./names.ts";

const RESULT = "turnstream.cli_telemetry.result";

/** The sink the worker's CLI telemetry receiver records into, on `meter`. */
export function cliTelemetryMetrics(meter: Meter): CliMetricsSink {
  const instruments: Record<CliInstrument, Counter> = {
    cliLinesOfCode: counter(meter, METRICS.cliLinesOfCode),
    cliCommits: counter(meter, METRICS.cliCommits),
    cliPullRequests: counter(meter, METRICS.cliPullRequests),
    cliCodeEditDecisions: counter(meter, METRICS.cliCodeEditDecisions),
    cliActiveTime: counter(meter, METRICS.cliActiveTime),
  };
  const watched: Readonly<CliOtlpStats>[] = [];
  observeCounts(meter, watched);
  return {
    add(increments) {
      for (const increment of increments) instruments[increment.instrument].add(increment.value, increment.attributes);
    },
    watch(stats) {
      watched.push(stats);
    },
  };
}

/** The receivers' counts, summed (a process may run more than one worker), each time a reader collects. */
function observeCounts(meter: Meter, watched: readonly Readonly<CliOtlpStats>[]): void {
  const spans = observableCounter(meter, METRICS.cliTelemetrySpans);
  const points = observableCounter(meter, METRICS.cliTelemetryMetricPoints);
  const unauthorized = observableCounter(meter, METRICS.cliTelemetryUnauthorized);
  const total = (read: (stats: Readonly<CliOtlpStats>) => number): number =>
    watched.reduce((sum, stats) => sum + read(stats), 0);
  meter.addBatchObservableCallback(
    (observation: BatchObservableResult) => {
      if (watched.length === 0) return;
      observation.observe(
        spans,
        total((s) => s.spans),
        { [RESULT]: "forwarded" },
      );
      observation.observe(
        spans,
        total((s) => s.refusedSpans),
        { [RESULT]: "refused" },
      );
      observation.observe(
        points,
        total((s) => s.metricPoints.recorded),
        { [RESULT]: "recorded" },
      );
      observation.observe(
        points,
        total((s) => s.metricPoints.notKept),
        { [RESULT]: "not_kept" },
      );
      observation.observe(
        points,
        total((s) => s.metricPoints.unknown),
        { [RESULT]: "unknown" },
      );
      observation.observe(
        points,
        total((s) => s.metricPoints.refused),
        { [RESULT]: "refused" },
      );
      observation.observe(
        unauthorized,
        total((s) => s.unauthorized),
      );
    },
    [spans, points, unauthorized],
  );
}
