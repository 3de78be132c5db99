// Observers see an attempt's events as the worker writes them, in log order, before they are
// buffered for the append: the way spans (and a user's own metrics) follow a run without a second
// path through the worker. They must not throw and must not block; the worker logs what they throw
// and goes on.
import type { ParsedLine } from "../protocol/index.ts";
import type { TraceIds } from "./schemas.ts";

/** What an observer knows of an attempt before its first event. */
export interface AttemptContext {
  readonly session: string;
  readonly turn: string;
  readonly attempt: number;
  readonly epoch: number;
  /** The producer's W3C traceparent, from the job. */
  readonly traceparent: string | undefined;
  /**
   * The session's own trace as a traceparent (the same for every attempt of the session): the
   * attempt span's parent when the producer named none, else a link beside the producer's parent.
   */
  readonly sessionTraceparent?: string | undefined;
  /**
   * The session's first attempt (turn 1's attempt 1): a span observer emits the session's own span
   * (sessionTraceparent's) beside its attempt span, so the session's trace has its root.
   */
  readonly opensSession?: boolean | undefined;
  /** The model the turn asked for. */
  readonly requestModel: string | undefined;
  /** The turn's tenant (its session's), when it has one. */
  readonly tenant?: string | undefined;
  /** ISO time of attempt.started. */
  readonly startedAt: string;
  /** The run's scrubber for text an observer exports (it knows the run's secret values once they are resolved). */
  scrub(text: string, field: string): string;
}

/** One event as written: the envelope minus what only the log assigns (seq). */
export interface ObservedEvent {
  readonly session: string;
  readonly turn: string;
  readonly attempt: number;
  readonly epoch: number;
  readonly kind: string;
  readonly at: string;
  readonly data: unknown;
}

export interface AttemptObserver {
  /** Ids the attempt's events carry (attempt.started `trace`), when this observer makes spans. */
  readonly trace?: TraceIds | undefined;
  /** Every event of the attempt; for a `cli.line`, the protocol's parse of its raw text. */
  onEvent(event: ObservedEvent, parsed?: ParsedLine): void;
  /** The attempt ended without a terminal event reaching the observer (fenced, crashed, stopped). */
  end?(reason: string): void;
  /**
   * Runs `fn` with this observer's attempt span active in the async context, so what the attempt
   * logs carries the span's ids. Only an observer that makes spans has it; the worker uses the first.
   */
  run?<T>(fn: () => T): T;
}

export interface EventObserver {
  /** Called once per attempt, before its first event; the result sees that attempt's events. */
  attempt(context: AttemptContext): AttemptObserver | undefined;
}
