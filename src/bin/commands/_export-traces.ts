// Helper for `turnstream replay`: re-exports a session's spans from its event log (for when the
// collector was down while the turns ran). Telemetry comes from the OTEL_* variables of `env`.
import type { SpanExporter } from "@opentelemetry/sdk-trace-base";
import type { HistoryReader } from "../../log/index.ts";
import {
  createScrubber,
  exportTracesFromLog,
  startTelemetry,
  type EnvLike,
  type Scrubber,
} from "../../telemetry/index.ts";

export interface ExportSessionTracesOptions {
  /** Where the session's events are read: the event log, or a SessionHistory that also looks in the archive. */
  log: Pick<HistoryReader, "read">;
  session: string;
  /** OTEL_* configuration and the secrets to scrub (its secret-looking variables). Default process.env. */
  env?: EnvLike;
  /** Default: a scrubber of `env`'s secret-looking variables. */
  scrubber?: Scrubber;
  /** Used instead of the configured OTLP exporter (tests). Still wrapped by the redacting exporter. */
  exporter?: SpanExporter;
  /** Record tool arguments and tool error texts (scrubbed); default off. */
  captureContent?: boolean;
}

export interface ExportSessionTracesResult {
  /** Spans re-emitted (0 when tracing is not configured). */
  spans: number;
  attempts: number;
  /** False when no OTEL exporter is configured: nothing was sent. */
  enabled: boolean;
}

export async function exportSessionTraces(options: ExportSessionTracesOptions): Promise<ExportSessionTracesResult> {
  const env = options.env ?? process.env;
  const scrubber = options.scrubber ?? createScrubber({ env });
  const telemetry = startTelemetry({ scrubber, env, exporter: options.exporter });
  if (!telemetry.enabled) return { spans: 0, attempts: 0, enabled: false };
  try {
    const exported = await exportTracesFromLog(options.log.read(options.session), {
      tracer: telemetry.tracer,
      scrubber,
      captureContent: options.captureContent,
    });
    await telemetry.forceFlush();
    return { spans: exported.spans, attempts: exported.attempts, enabled: true };
  } finally {
    await telemetry.shutdown();
  }
}
