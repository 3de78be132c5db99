// The CLI's own telemetry joined into the turn's trace and the worker's metrics: the environment that
// turns it on (or keeps it off), the loopback OTLP/HTTP JSON receiver with a token per CLI process,
// the allow-list and scrubbing each received span passes before it reaches the worker's exporter, and
// the allow-list of metrics and attribute values that become the worker's instruments.
export {
  CLI_OTLP_DEFAULT_MAX_BODY_BYTES,
  CLI_OTLP_MAX_IN_FLIGHT,
  CLI_OTLP_MAX_SPANS_PER_ATTEMPT,
  CLI_OTLP_TOKEN_PREFIX,
  CliTelemetryGrant,
  startCliOtlpReceiver,
  type CliOtlpReceiver,
  type CliOtlpReceiverOptions,
} from "./receiver.ts";
export { CLI_TELEMETRY_VARS, cliTelemetryEnv, isCliTelemetryVar, type CliTelemetryTarget } from "./env.ts";
export { cliSpans, type AttemptBinding, type ConvertedSpans, type SpanRoute } from "./spans.ts";
export {
  ACTIVE_TIME_TYPES,
  CLI_METRICS,
  CLI_METRICS_NOT_KEPT,
  cliMetricAttributes,
  cliMetricIncrements,
  CumulativeSeries,
  EDIT_DECISIONS,
  EDIT_LANGUAGES,
  EDIT_SOURCES,
  EDIT_TOOLS,
  LINE_TYPES,
  type CliInstrument,
  type CliMetricIncrement,
  type CliMetricsSink,
  type CliOtlpStats,
  type MetricPointCounts,
} from "./metrics.ts";
export { CONTENT_ATTRIBUTES, FACT_ATTRIBUTES, RESOURCE_ATTRIBUTES } from "./attributes.ts";
