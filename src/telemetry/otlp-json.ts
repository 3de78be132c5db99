// Spans as an OTLP/JSON file: the ExportTraceServiceRequest JSON encoding (resourceSpans → scopeSpans
// → spans; hex trace and span ids, int64 nanoseconds as strings, typed attribute values) that an
// OTLP/HTTP JSON endpoint accepts and trace UIs load. The encoding is the OpenTelemetry SDK's own
// serializer, the one the http/json trace exporter sends with, so a file says what the wire would;
// only its integer attribute values are turned into decimal strings, the proto3 JSON form of an int64
// (receivers take numbers too, but a file may meet stricter readers than a collector).
import { createRequire } from "node:module";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base";

interface TraceSerializer {
  serializeRequest(spans: ReadableSpan[]): Uint8Array | undefined;
}

const load = createRequire(import.meta.url);
let serializer: TraceSerializer | undefined;

/** The http/json trace exporter's serializer, loaded from that exporter's own dependency. */
function jsonSerializer(): TraceSerializer {
  if (serializer !== undefined) return serializer;
  const fromExporter = createRequire(load.resolve("@opentelemetry/exporter-trace-otlp-http"));
  const transformer = fromExporter("@opentelemetry/otlp-transformer") as { JsonTraceSerializer: TraceSerializer };
  return (serializer = transformer.JsonTraceSerializer);
}

/** One ExportTraceServiceRequest holding `spans`, as OTLP/JSON text. */
export function otlpJson(spans: readonly ReadableSpan[]): string {
  const bytes = jsonSerializer().serializeRequest([...spans]);
  if (bytes === undefined) throw new Error("the OTLP/JSON serializer produced nothing");
  const request = JSON.parse(new TextDecoder().decode(bytes)) as unknown;
  return JSON.stringify(request, (key, value: unknown) =>
    key === "intValue" && typeof value === "number" ? String(value) : value,
  );
}

/**
 * An exporter that keeps what it is given (for writing it out after). Unlike the SDK's in-memory
 * exporter it keeps the spans through shutdown, which the telemetry's own shutdown calls.
 */
export class CollectingSpanExporter implements SpanExporter {
  readonly spans: ReadableSpan[] = [];

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.spans.push(...spans);
    resultCallback({ code: ExportResultCode.SUCCESS });
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
}
