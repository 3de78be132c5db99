// Helpers for `turnstream replay --export-traces` and `turnstream export --format otlp-json`: a
// session's spans rebuilt from its event log, sent to the configured exporter (for when the collector
// was down while the turns ran) or kept for a file. Telemetry comes from the OTEL_* variables of `env`.
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base";
import type { HistoryReader } from "../../log/index.ts";
import {
  CollectingSpanExporter,
  createScrubber,
  exportTracesFromLog,
  startTelemetry,
  type EnvLike,
  type Scrubber,
} from "../../telemetry/index.ts";

export interface ExportSessionTracesOptions {
  /** Where the session's events are read: the event log, or a SessionHistory that also looks in the archive. */
  log: Pick<HistoryReader, "read"> & Partial<Pick<HistoryReader, "prefix">>;
  session: string;
  /** OTEL_* configuration and the secrets to scrub (its secret-looking variables). Default process.env. */
  env?: EnvLike;
  /** Default: a scrubber of `env`'s secret-looking variables. */
  scrubber?: Scrubber;
  /** Used instead of the configured OTLP exporter (tests). Still wrapped by the redacting exporter. */
  exporter?: SpanExporter;
  /** Record tool arguments and tool error texts (scrubbed); default off. */
  captureContent?: boolean;
  /** "batch" (default) or "simple": hand each span to the exporter as it ends. */
  processor?: "batch" | "simple";
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
  const telemetry = startTelemetry({ scrubber, env, exporter: options.exporter, processor: options.processor });
  if (!telemetry.enabled) return { spans: 0, attempts: 0, enabled: false };
  try {
    const exported = await exportTracesFromLog(options.log.read(options.session), {
      tracer: telemetry.tracer,
      scrubber,
      captureContent: options.captureContent,
      logPrefix: options.log.prefix,
      emit: telemetry.emit,
    });
    await telemetry.forceFlush();
    return { spans: exported.spans, attempts: exported.attempts, enabled: true };
  } finally {
    await telemetry.shutdown();
  }
}

/**
 * The session's spans as exportSessionTraces derives them, kept instead of sent (already through the
 * redacting exporter): for writing them to a file.
 */
export async function collectSessionTraces(
  options: Omit<ExportSessionTracesOptions, "exporter" | "processor">,
): Promise<{ spans: ReadableSpan[]; attempts: number }> {
  const collector = new CollectingSpanExporter();
  // Each span as it ends: a batch queue drops spans once full, and a file must hold them all.
  const exported = await exportSessionTraces({ ...options, exporter: collector, processor: "simple" });
  return { spans: collector.spans, attempts: exported.attempts };
}
