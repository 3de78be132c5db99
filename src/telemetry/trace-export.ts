// Re-emits a session's spans from its event log (e.g. after the collector was down): the logged
// events go through the same attempt spans the worker feeds, each cli.line parsed once, so structure
// and timing match the live export. The trace ids the events carry put the spans back into the
// producer's trace.
import type { Tracer } from "@opentelemetry/api";
import { dataOf, type AttemptContext, type ObservedEvent } from "../events/index.ts";
import type { Scrubber } from "./scrub.ts";
import { AttemptSpans } from "./spans/index.ts";
import { contextFromTraceparent, formatTraceparent } from "./trace-context.ts";

export interface ExportTracesOptions {
  tracer: Tracer;
  scrubber: Scrubber;
  /** Record tool arguments and tool error texts (scrubbed); default off. */
  captureContent?: boolean | undefined;
}

export interface ExportTracesResult {
  /** Spans started (and ended): attempt spans plus tool spans. */
  spans: number;
  attempts: number;
}

// Kinds that open an attempt's spans when none are open for that attempt yet.
const OPENS = new Set(["attempt.started", "cli.line", "cli.stderr", "cli.exit"]);

export async function exportTracesFromLog(
  events: AsyncIterable<ObservedEvent> | Iterable<ObservedEvent>,
  options: ExportTracesOptions,
): Promise<ExportTracesResult> {
  const scrub = (text: string, field: string): string => options.scrubber.scrub(text, { sink: "span", field });
  /** The open attempt of each turn: a later attempt supersedes an earlier one left open (its worker died). */
  const open = new Map<string, AttemptSpans>();
  const producerOf = new Map<string, string>();
  const result: ExportTracesResult = { spans: 0, attempts: 0 };
  const close = (turn: string, spans: AttemptSpans): void => {
    spans.end();
    result.spans += spans.spanCount;
    open.delete(turn);
  };

  for await (const event of events) {
    if (event.kind === "turn.queued") {
      const traceparent = dataOf("turn.queued", event.data)?.traceparent;
      if (traceparent !== undefined && contextFromTraceparent(traceparent) !== undefined)
        producerOf.set(event.turn, traceparent);
      continue;
    }
    let spans = open.get(event.turn);
    if (spans?.attempt !== event.attempt) {
      if (!OPENS.has(event.kind)) continue;
      if (spans !== undefined) close(event.turn, spans);
      spans = new AttemptSpans(contextOf(event, producerOf.get(event.turn), scrub), options);
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

/** What the worker knew of the attempt, rebuilt from the event that opens its spans. */
function contextOf(event: ObservedEvent, producer: string | undefined, scrub: AttemptContext["scrub"]): AttemptContext {
  return {
    session: event.session,
    turn: event.turn,
    attempt: event.attempt,
    epoch: event.epoch,
    traceparent: parentOf(event, producer),
    requestModel: undefined,
    startedAt: event.at,
    scrub,
  };
}

/**
 * Parent of a re-exported attempt span, as a traceparent. The producer's span when the events name
 * it; otherwise the original attempt span, as a remote parent, so the re-export keeps the recorded
 * trace id (an OTel tracer cannot be told which span id to mint, only which parent to use).
 */
function parentOf(event: ObservedEvent, producer: string | undefined): string | undefined {
  const ids = event.kind === "attempt.started" ? dataOf("attempt.started", event.data)?.trace : undefined;
  if (ids?.parentSpanId !== undefined) return formatTraceparent({ traceId: ids.traceId, spanId: ids.parentSpanId });
  if (producer !== undefined) return producer;
  if (ids !== undefined) return formatTraceparent(ids);
  return undefined;
}
