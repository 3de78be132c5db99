// W3C trace context across the queue and the event log. The producer puts a `traceparent` into the
// job; the worker makes each attempt span its child (or, without one, a child of the session's own
// trace) and writes the ids into the attempt's events, so a re-export from the log lands in the same
// trace. (The ids in the log are read through the event
// vocabulary: `dataOf("attempt.started", data)?.trace`.)
import { createHash } from "node:crypto";
import { ROOT_CONTEXT, trace, TraceFlags, type Context, type Span, type SpanContext } from "@opentelemetry/api";
import { parseTraceParent } from "@opentelemetry/core";
import type { TraceIds } from "../events/index.ts";

export type { TraceIds };

function spanContextOf(from: Context | Span | undefined): SpanContext | undefined {
  if (from === undefined) return undefined;
  const sc =
    "spanContext" in from && typeof from.spanContext === "function"
      ? from.spanContext()
      : trace.getSpanContext(from as Context);
  return sc !== undefined && trace.isSpanContextValid(sc) ? sc : undefined;
}

/** `00-<trace>-<span>-<flags>` of a span context. */
export function formatTraceparent(sc: Pick<SpanContext, "traceId" | "spanId"> & { traceFlags?: number }): string {
  const flags = ((sc.traceFlags ?? TraceFlags.SAMPLED) & 0xff).toString(16).padStart(2, "0");
  return `00-${sc.traceId}-${sc.spanId}-${flags}`;
}

/**
 * The W3C traceparent of a span or context (default: the active context), for the producer to put into
 * the job. Undefined when there is no valid span (tracing off, or no span active).
 */
export function injectTraceparent(from?: Context | Span): string | undefined {
  const sc = spanContextOf(from ?? trace.getActiveSpan());
  return sc === undefined ? undefined : formatTraceparent(sc);
}

/** A context whose (remote) parent is the span a traceparent names; undefined when it is malformed. */
export function contextFromTraceparent(
  traceparent: string | undefined,
  base: Context = ROOT_CONTEXT,
): Context | undefined {
  if (typeof traceparent !== "string") return undefined;
  const sc = parseTraceParent(traceparent.trim());
  if (sc === null || !trace.isSpanContextValid(sc)) return undefined;
  return trace.setSpanContext(base, { ...sc, isRemote: true });
}

/**
 * The trace every attempt of a session shares when no producer names one: its ids are derived from
 * the log's key prefix and the session id, so any worker, and a re-export from the log, lands in the
 * same trace. The span id names the session itself: each attempt span hangs under it, and a trace UI
 * shows the session's attempts side by side. The session's first attempt emits that span, short, as
 * the trace's root (spans/session.ts).
 */
export function sessionSpanContext(prefix: string, session: string): SpanContext {
  const digest = createHash("sha256").update(`turnstream.session\0${prefix}\0${session}`).digest("hex");
  return { traceId: digest.slice(0, 32), spanId: digest.slice(32, 48), traceFlags: TraceFlags.SAMPLED, isRemote: true };
}

/** The session's trace (sessionSpanContext) as a traceparent. */
export function sessionTraceparent(prefix: string, session: string): string {
  return formatTraceparent(sessionSpanContext(prefix, session));
}
