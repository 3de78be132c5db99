// The CLI's own telemetry joined into the turn's trace: the environment that turns it on (or keeps
// it off), the loopback OTLP/HTTP JSON receiver with a token per CLI process, and the allow-list
// and scrubbing each received span passes before it reaches the worker's exporter.
export {
  CLI_OTLP_DEFAULT_MAX_BODY_BYTES,
  CLI_OTLP_TOKEN_PREFIX,
  CliTelemetryGrant,
  startCliOtlpReceiver,
  type CliOtlpReceiver,
  type CliOtlpReceiverOptions,
  type CliOtlpStats,
} from "./receiver.ts";
export { CLI_TELEMETRY_VARS, cliTelemetryEnv, isCliTelemetryVar, type CliTelemetryTarget } from "./env.ts";
export { cliSpans, type AttemptBinding, type ConvertedSpans, type SpanRoute } from "./spans.ts";
export { CONTENT_ATTRIBUTES, FACT_ATTRIBUTES, RESOURCE_ATTRIBUTES } from "./attributes.ts";
