// The CLI's environment for its own telemetry, decided by the worker alone: on, it exports spans
// (while the worker traces) and metrics (while the worker keeps metrics) over OTLP/HTTP JSON to the
// worker's receiver with its own token, its top span a child of the attempt span (TRACEPARENT); off,
// every variable that could turn it on or point it elsewhere is removed. No OTEL_* variable of the
// worker's reaches the CLI either way: the worker's own OTEL_EXPORTER_OTLP_HEADERS may hold a
// collector's API key.

/** The variables the worker sets or removes; with every OTEL_* name, the ones a job may never set. */
export const CLI_TELEMETRY_VARS: readonly string[] = [
  "CLAUDE_CODE_ENABLE_TELEMETRY",
  "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA",
  "TRACEPARENT",
  "TRACESTATE",
  // The rest of the trace context TRACEPARENT starts: the worker's alone, even from its runEnv.
  "BAGGAGE",
  "OTEL_TRACES_EXPORTER",
  "OTEL_METRICS_EXPORTER",
  "OTEL_LOGS_EXPORTER",
  "OTEL_EXPORTER_OTLP_PROTOCOL",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
  "OTEL_METRIC_EXPORT_INTERVAL",
  "OTEL_LOG_USER_PROMPTS",
  "OTEL_LOG_TOOL_DETAILS",
];

/** Whether the worker alone decides `name` in a CLI's environment. */
export function isCliTelemetryVar(name: string): boolean {
  return name.startsWith("OTEL_") || CLI_TELEMETRY_VARS.includes(name);
}

/** What a CLI with telemetry on is told: where to send, with which token, under which span. */
export interface CliTelemetryTarget {
  /** The receiver's base URL. */
  url: string;
  token: string;
  /** The attempt span, as a traceparent; undefined when the worker does not trace (no spans asked for). */
  traceparent: string | undefined;
  /** Ask for the CLI's metrics (the worker keeps metrics). */
  metrics: boolean;
  /** Ask the CLI for prompt and tool detail texts (kept scrubbed: TURNSTREAM_CLI_TELEMETRY_CONTENT=1). */
  content: boolean;
}

/**
 * How often a CLI exports its metrics: a kept warm process flushes only on this clock (a cold one
 * also when it exits), and its counts should reach the worker's instruments within a turn or two.
 */
export const CLI_METRIC_EXPORT_INTERVAL_MS = 10_000;

/**
 * The overlay that decides the CLI's own telemetry: every name of CLI_TELEMETRY_VARS, set or
 * removed (`undefined`). Laid over everything else in the run's overlay; OTEL_* names that are not
 * listed here are taken out of the layers below (runOverlay).
 */
export function cliTelemetryEnv(target: CliTelemetryTarget | undefined): Record<string, string | undefined> {
  const off: Record<string, string | undefined> = {};
  for (const name of CLI_TELEMETRY_VARS) off[name] = undefined;
  if (target === undefined) return off;
  const on: Record<string, string | undefined> = {
    ...off,
    CLAUDE_CODE_ENABLE_TELEMETRY: "1",
    CLAUDE_CODE_ENHANCED_TELEMETRY_BETA: "1",
    OTEL_TRACES_EXPORTER: target.traceparent === undefined ? "none" : "otlp",
    TRACEPARENT: target.traceparent,
    OTEL_METRICS_EXPORTER: target.metrics ? "otlp" : "none",
    // Delta: each export says what happened since the last, and a kept process's counts are not
    // sent again with every export (the receiver turns a cumulative series into its rises all the same).
    OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: target.metrics ? "delta" : undefined,
    OTEL_METRIC_EXPORT_INTERVAL: target.metrics ? String(CLI_METRIC_EXPORT_INTERVAL_MS) : undefined,
    // Not asked for: the CLI's log events repeat its spans with more content in them.
    OTEL_LOGS_EXPORTER: "none",
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_EXPORTER_OTLP_ENDPOINT: target.url,
    OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer ${target.token}`,
  };
  if (target.content) {
    on["OTEL_LOG_USER_PROMPTS"] = "1";
    on["OTEL_LOG_TOOL_DETAILS"] = "1";
  }
  return on;
}
