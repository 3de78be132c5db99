// Re-emits a session's spans from its event log (e.g. after the collector was down): the same
// envelopes go through the same span builder, so structure and timing match the live export. The
// trace ids the events carry put the spans back into the producer's trace.
import type { Context, Tracer } from "@opentelemetry/api";
import type { Scrubber } from "./scrub.ts";
import { ATTEMPT_END_KINDS, createAttemptSpans, type AttemptSpans, type EnvelopeLike } from "./spans.ts";
import { contextFromIds, contextFromTraceparent, traceIdsOf, traceparentOf } from "./trace-context.ts";

export interface ExportTracesOptions {
  tracer: Tracer;
  scrubber: Scrubber;
  /** As in createAttemptSpans; default off. */
  captureContent?: boolean;
  /** Session id for attempts whose envelopes do not name one. */
  session?: string;
}

export interface ExportTracesResult {
  /** Spans started (and ended): attempt spans plus tool spans. */
  spans: number;
  attempts: number;
}

// Kinds that open an attempt's spans when no span exists for that (turn, attempt) yet.
const OPENS = new Set(["attempt.started", "cli.line", "cli.stderr", "cli.exit"]);

/**
 * Parent of a re-exported attempt span. The producer's span when the events name it; otherwise the
 * original attempt span id, as a remote parent, so the re-export keeps the recorded trace id (an
 * OTel tracer cannot be told which span id to mint, only which parent to use).
 */
function parentFor(env: EnvelopeLike, producer: string | undefined): Context | undefined {
  const ids = traceIdsOf(env);
  if (ids?.parentSpanId !== undefined) return contextFromIds(ids.traceId, ids.parentSpanId);
  if (producer !== undefined) return contextFromTraceparent(producer);
  if (ids !== undefined) return contextFromIds(ids.traceId, ids.spanId);
  return undefined;
}

export async function exportTracesFromLog(
  envelopes: AsyncIterable<EnvelopeLike> | Iterable<EnvelopeLike>,
  options: ExportTracesOptions,
): Promise<ExportTracesResult> {
  const open = new Map<string, AttemptSpans>();
  const producerByTurn = new Map<string, string>();
  let spans = 0;
  let attempts = 0;

  const close = (key: string, s: AttemptSpans): void => {
    s.end();
    spans += s.spanCount();
    open.delete(key);
  };

  for await (const env of envelopes as AsyncIterable<EnvelopeLike>) {
    const turn = env.turn ?? "";
    const attempt = env.attempt ?? 0;
    if (env.kind === "turn.queued") {
      const tp = traceparentOf(env);
      if (tp !== undefined) producerByTurn.set(turn, tp);
      continue;
    }
    const key = `${turn}\u0000${attempt}`;
    let s = open.get(key);
    if (s === undefined) {
      if (!OPENS.has(env.kind)) continue;
      // A later attempt of the same turn supersedes any earlier one left open (its worker died).
      for (const [k, other] of open) if (k.startsWith(`${turn}\u0000`)) close(k, other);
      const parentContext = parentFor(env, producerByTurn.get(turn));
      s = createAttemptSpans({
        tracer: options.tracer,
        scrubber: options.scrubber,
        session: env.session ?? options.session ?? "",
        turn,
        attempt,
        ...(parentContext === undefined ? {} : { parentContext }),
        ...(env.at === undefined ? {} : { startTime: env.at }),
        ...(options.captureContent === undefined ? {} : { captureContent: options.captureContent }),
      });
      attempts++;
      open.set(key, s);
    }
    s.onEnvelope(env);
    if (ATTEMPT_END_KINDS.includes(env.kind) || s.ended) close(key, s);
  }
  for (const [k, s] of open) close(k, s);
  return { spans, attempts };
}
