// The CLI's environment for its own telemetry, decided by the worker alone: on, it exports spans
// over OTLP/HTTP JSON to the worker's receiver with its own token, its top span a child of the
// attempt span (TRACEPARENT); off, every variable that could turn it on or point it elsewhere is
// removed. No OTEL_* variable of the worker's reaches the CLI either way: the worker's own
// OTEL_EXPORTER_OTLP_HEADERS may hold a collector's API key.

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
  /** The attempt span, as a traceparent. */
  traceparent: string;
  /** Ask the CLI for prompt and tool detail texts (kept scrubbed: TURNSTREAM_CLI_TELEMETRY_CONTENT=1). */
  content: boolean;
}

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
    TRACEPARENT: target.traceparent,
    OTEL_TRACES_EXPORTER: "otlp",
    // Not asked for: the worker's metrics count the same tokens, cost and time from the CLI's result
    // lines and model calls, and its log events repeat the spans with more content in them.
    OTEL_METRICS_EXPORTER: "none",
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
