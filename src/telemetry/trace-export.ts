// Re-emits a session's spans from its event log (e.g. after the collector was down): the logged
// events go through the same attempt spans the worker feeds, each cli.line parsed once, so structure
// and timing match the live export. The trace ids the events carry put the spans back into the
// producer's trace, or the session's. A re-export from the session's first turn emits the session's
// own span too, with the ids the worker gave it.
import type { Tracer } from "@opentelemetry/api";
import { dataOf, type AttemptContext, type ObservedEvent } from "../events/index.ts";
import type { Scrubber } from "./scrub.ts";
import { AttemptSpans, type EmitSpans } from "./spans/index.ts";
import { contextFromTraceparent, formatTraceparent, sessionTraceparent } from "./trace-context.ts";

export interface ExportTracesOptions {
  tracer: Tracer;
  scrubber: Scrubber;
  /** Record tool arguments and tool error texts (scrubbed); default off. */
  captureContent?: boolean | undefined;
  /**
   * The log's key prefix: with it the session's own trace is derived as the worker derives it
   * (sessionTraceparent), for attempts the log gives no trace ids of and for the link to the session.
   */
  logPrefix?: string | undefined;
  /** Where the session's own span goes (Telemetry.emit); without it (or the prefix) none is made. */
  emit?: EmitSpans | undefined;
}

/** An event as the log holds it: its seq says where in the session it is. */
export type LoggedEvent = ObservedEvent & { readonly seq?: number | undefined };

export interface ExportTracesResult {
  /** Spans started (and ended): attempt spans plus tool spans. */
  spans: number;
  attempts: number;
}

// Kinds that open an attempt's spans when none are open for that attempt yet.
const OPENS = new Set(["attempt.started", "cli.line", "cli.stderr", "cli.exit"]);

export async function exportTracesFromLog(
  events: AsyncIterable<LoggedEvent> | Iterable<LoggedEvent>,
  options: ExportTracesOptions,
): Promise<ExportTracesResult> {
  const scrub = (text: string, field: string): string => options.scrubber.scrub(text, { sink: "span", field });
  /** The open attempt of each turn: a later attempt supersedes an earlier one left open (its worker died). */
  const open = new Map<string, AttemptSpans>();
  const producerOf = new Map<string, string>();
  /** The session's first turn, when the events begin with it (its turn.queued is the log's seq 1). */
  let firstTurn: string | undefined;
  const result: ExportTracesResult = { spans: 0, attempts: 0 };
  const close = (turn: string, spans: AttemptSpans): void => {
    spans.end();
    result.spans += spans.spanCount;
    open.delete(turn);
  };

  for await (const event of events) {
    if (event.kind === "turn.queued") {
      if (event.seq === 1) firstTurn = event.turn;
      const traceparent = dataOf("turn.queued", event.data)?.traceparent;
      if (traceparent !== undefined && contextFromTraceparent(traceparent) !== undefined)
        producerOf.set(event.turn, traceparent);
      continue;
    }
    let spans = open.get(event.turn);
    if (spans?.attempt !== event.attempt) {
      if (!OPENS.has(event.kind)) continue;
      if (spans !== undefined) close(event.turn, spans);
      const session =
        options.logPrefix === undefined ? undefined : sessionTraceparent(options.logPrefix, event.session);
      const opensSession = event.turn === firstTurn && event.attempt === 1;
      const traces = { producer: producerOf.get(event.turn), session };
      spans = new AttemptSpans({ ...contextOf(event, traces, scrub), opensSession }, options);
      result.attempts++;
      open.set(event.turn, spans);
    }
    // No parse is passed: the spans parse each cli.line once themselves.
    spans.onEvent(event);
    if (spans.ended) close(event.turn, spans);
  }
  for (const [turn, spans] of open) close(turn, spans);
  return result;
}

/** The traces an attempt's spans may belong to: its producer's (from turn.queued) and its session's. */
interface KnownTraces {
  producer: string | undefined;
  session: string | undefined;
}

/** What the worker knew of the attempt, rebuilt from the event that opens its spans. */
function contextOf(event: ObservedEvent, traces: KnownTraces, scrub: AttemptContext["scrub"]): AttemptContext {
  return {
    session: event.session,
    turn: event.turn,
    attempt: event.attempt,
    epoch: event.epoch,
    traceparent: parentOf(event, traces.producer),
    sessionTraceparent: traces.session,
    requestModel: undefined,
    startedAt: event.at,
    scrub,
  };
}

/**
 * Parent of a re-exported attempt span, as a traceparent. The parent attempt.started recorded (the
 * producer's span, or the session's); else the producer's span when turn.queued names it; else the
 * original attempt span, as a remote parent, so the re-export keeps the recorded trace id (an OTel
 * tracer cannot be told which span id to mint, only which parent to use). With none of them the
 * attempt span's parent is the session's (contextOf), when the prefix is known.
 */
function parentOf(event: ObservedEvent, producer: string | undefined): string | undefined {
  const ids = event.kind === "attempt.started" ? dataOf("attempt.started", event.data)?.trace : undefined;
  if (ids?.parentSpanId !== undefined) return formatTraceparent({ traceId: ids.traceId, spanId: ids.parentSpanId });
  if (producer !== undefined) return producer;
  if (ids !== undefined) return formatTraceparent(ids);
  return undefined;
}
