// Telemetry: the scrubber every sink shares, the pino logger, error scrubbing, OTel tracing with a
// redacting exporter, spans as OTLP/JSON files, and the documented list of environment variables.
export {
  BUILTIN_PATTERNS,
  createScrubber,
  isSecretEnvName,
  isSecretFieldName,
  redactionMarker,
  scrubError,
  ScrubberConfigError,
  secretShapeIn,
  valueVariants,
  type EnvLike,
  type ScrubContext,
  type ScrubHook,
  type ScrubPattern,
  type Scrubber,
  type ScrubberOptions,
  type SecretValues,
} from "./scrub.ts";
export { createLogger, REDACT_PATHS, type CreateLoggerOptions, type Logger } from "./logger.ts";
export { routeConsoleToLogger } from "./console.ts";
export { RedactingSpanExporter, scrubAttributes } from "./redacting-exporter.ts";
export {
  DEFAULT_SERVICE_NAME,
  startTelemetry,
  TRACER_NAME,
  tracesConfig,
  type StartTelemetryOptions,
  type Telemetry,
  type TracesConfig,
} from "./otel.ts";
export {
  nonEmpty,
  otlpEndpointSet,
  otlpSettings,
  positiveMs,
  sdkDisabled,
  serviceIdentity,
  TelemetryConfigError,
  type OtlpProtocol,
  type OtlpSettings,
  type OtlpSignal,
} from "./otlp-env.ts";
export {
  ENV_VARS,
  ENV_VAR_NAMES,
  REMOVED_ENV_VARS,
  removedEnvVarsSet,
  warnRemovedEnvVars,
  type EnvVarDoc,
  type RemovedEnvVar,
} from "./env-vars.ts";
export {
  AGENT_NAME,
  ATTEMPT_SPAN_NAME,
  attemptSpansObserver,
  GENAI,
  SESSION_SPAN_NAME,
  toolSpanName,
  type AttemptSpansOptions,
} from "./spans/index.ts";
export {
  contextFromTraceparent,
  formatTraceparent,
  injectTraceparent,
  sessionSpanContext,
  sessionTraceparent,
  type TraceIds,
} from "./trace-context.ts";
export { exportTracesFromLog, type ExportTracesOptions, type ExportTracesResult } from "./trace-export.ts";
export { CollectingSpanExporter, otlpJson } from "./otlp-json.ts";
export {
  CLI_OTLP_DEFAULT_MAX_BODY_BYTES,
  CLI_OTLP_MAX_IN_FLIGHT,
  CLI_OTLP_MAX_SPANS_PER_ATTEMPT,
  CLI_OTLP_TOKEN_PREFIX,
  CLI_TELEMETRY_VARS,
  CliTelemetryGrant,
  cliTelemetryEnv,
  isCliTelemetryVar,
  startCliOtlpReceiver,
  CLI_METRICS,
  CLI_METRICS_NOT_KEPT,
  cliMetricAttributes,
  cliMetricIncrements,
  CumulativeSeries,
  type AttemptBinding,
  type CliInstrument,
  type CliMetricIncrement,
  type CliMetricsSink,
  type CliOtlpReceiver,
  type CliOtlpStats,
  type CliTelemetryTarget,
} from "./cli-otlp/index.ts";
