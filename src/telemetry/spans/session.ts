// The session's own span: the root of a session's trace (sessionSpanContext). Its ids are derived,
// not minted, so no tracer can start it: it is built as a finished span and handed to the span
// processors (Telemetry.emit), once, when the session's first attempt (turn 1's attempt 1) starts,
// live or re-exported from the log. A short span: no process knows when a session ends.
import { SpanKind, SpanStatusCode, trace, type Span } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { finishedSpan } from "../finished-span.ts";
import { contextFromTraceparent } from "../trace-context.ts";
import { SESSION_SPAN_NAME } from "./names.ts";

/** Hands finished spans with ids of their own to the span processors (Telemetry.emit). */
export type EmitSpans = (spans: readonly ReadableSpan[]) => void;

/**
 * The session's span, beside the first attempt's span (`attemptSpan`: a span the SDK made, whose
 * resource and scope it shares); undefined when `attemptSpan` is no recording SDK span (tracing off).
 */
export function sessionSpan(
  session: string,
  sessionTraceparent: string,
  attemptSpan: Span,
  startMs: number,
): ReadableSpan | undefined {
  const context = contextFromTraceparent(sessionTraceparent);
  const ids = context === undefined ? undefined : trace.getSpanContext(context);
  const made = attemptSpan as Partial<ReadableSpan>;
  if (ids === undefined || made.resource === undefined || made.instrumentationScope === undefined) return undefined;
  const time: [number, number] = [Math.floor(startMs / 1000), (startMs % 1000) * 1e6];
  return finishedSpan({
    name: SESSION_SPAN_NAME,
    kind: SpanKind.INTERNAL,
    traceId: ids.traceId,
    spanId: ids.spanId,
    parentSpanId: undefined,
    startTime: time,
    endTime: time,
    status: { code: SpanStatusCode.UNSET },
    // The session id only: the log's key prefix it is derived from stays in the worker.
    attributes: { "turnstream.session": session },
    resource: made.resource,
    instrumentationScope: made.instrumentationScope,
  });
}
