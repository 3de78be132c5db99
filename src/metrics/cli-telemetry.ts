// The CLI's own metrics as the worker's instruments, and the worker's CLI telemetry receiver's counts.
// The receiver has already passed every point through the allow-list (src/telemetry/cli-otlp/metrics.ts):
// what reaches `add` names one of the instruments below, with attributes from their closed sets. The
// receiver's counts (spans forwarded and refused, posts without a live token, metric points by what
// became of them) are read when a reader collects, so an operator sees forged posts.
import type { BatchObservableResult, Counter, Meter, Observable } from "@opentelemetry/api";
import type { CliInstrument, CliMetricsSink, CliOtlpStats } from "../telemetry/index.ts";
import { counter, observableCounter } from "./instruments.ts";
import { CLI_POINT_RESULTS, CLI_SPAN_RESULTS, METRICS } from "./names.ts";

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

type Count = (stats: Readonly<CliOtlpStats>) => number;

/** Each result a span count is observed under, and where the receiver keeps it. */
const SPAN_COUNTS: Record<(typeof CLI_SPAN_RESULTS)[number], Count> = {
  forwarded: (stats) => stats.spans,
  refused: (stats) => stats.refusedSpans,
};
/** Each result a metric point count is observed under, and where the receiver keeps it. */
const POINT_COUNTS: Record<(typeof CLI_POINT_RESULTS)[number], Count> = {
  recorded: (stats) => stats.metricPoints.recorded,
  not_kept: (stats) => stats.metricPoints.notKept,
  unknown: (stats) => stats.metricPoints.unknown,
  refused: (stats) => stats.metricPoints.refused,
};

/** The receivers' counts, summed (a process may run more than one worker), each time a reader collects. */
function observeCounts(meter: Meter, watched: readonly Readonly<CliOtlpStats>[]): void {
  const spans = observableCounter(meter, METRICS.cliTelemetrySpans);
  const points = observableCounter(meter, METRICS.cliTelemetryMetricPoints);
  const unauthorized = observableCounter(meter, METRICS.cliTelemetryUnauthorized);
  const total = (read: Count): number => watched.reduce((sum, stats) => sum + read(stats), 0);
  const observeEach = (observation: BatchObservableResult, counter: Observable, counts: Record<string, Count>) => {
    for (const [result, read] of Object.entries(counts))
      observation.observe(counter, total(read), { [RESULT]: result });
  };
  meter.addBatchObservableCallback(
    (observation: BatchObservableResult) => {
      if (watched.length === 0) return;
      observeEach(observation, spans, SPAN_COUNTS);
      observeEach(observation, points, POINT_COUNTS);
      observation.observe(
        unauthorized,
        total((stats) => stats.unauthorized),
      );
    },
    [spans, points, unauthorized],
  );
}
