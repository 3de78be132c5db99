// Test support: an attempt's spans started the way the worker starts them (attemptSpansObserver, with
// an AttemptContext whose scrub is the scrubber bound to the "span" sink), and valid event data.
import type { Tracer } from "@opentelemetry/api";
import type { AttemptStartedData, ObservedEvent, TraceIds } from "../../src/events/index.ts";
import type { ParsedLine } from "../../src/protocol/index.ts";
import { attemptSpansObserver, type Scrubber } from "../../src/telemetry/index.ts";

export interface StartSpansOptions {
  tracer: Tracer;
  scrubber: Scrubber;
  session?: string;
  turn?: string;
  attempt?: number;
  startedAt: string;
  traceparent?: string;
  requestModel?: string;
  captureContent?: boolean;
}

export interface TestAttemptSpans {
  readonly trace: TraceIds;
  onEvent(event: ObservedEvent, parsed?: ParsedLine): void;
  end(reason: string): void;
}

/** The attempt spans the worker's observer makes for one attempt. */
export function startSpans(options: StartSpansOptions): TestAttemptSpans {
  const spans = attemptSpansObserver({ tracer: options.tracer, captureContent: options.captureContent }).attempt({
    session: options.session ?? "sess-1",
    turn: options.turn ?? "turn-1",
    attempt: options.attempt ?? 1,
    epoch: 1,
    traceparent: options.traceparent,
    requestModel: options.requestModel,
    startedAt: options.startedAt,
    scrub: (text, field) => options.scrubber.scrub(text, { sink: "span", field }),
  });
  if (spans?.trace === undefined) throw new Error("attempt spans carry trace ids");
  return {
    trace: spans.trace,
    onEvent: (event, parsed) => spans.onEvent(event, parsed),
    end: (reason) => spans.end?.(reason),
  };
}

/** Valid data of the kinds the tests write, with the fields the worker always sets. */
export const data = {
  started: (attempt: number, trace?: TraceIds): AttemptStartedData => {
    const started: AttemptStartedData = { worker: "w-test", attempt, cwd: "/work" };
    if (trace !== undefined) started.trace = trace;
    return started;
  },
  exit: (code: number | null) => ({ code, signal: null, durationMs: 100 }),
  finished: (attempt: number) => ({ attempt }),
  failed: (attempt: number, errorKind: string, message: string) => ({
    attempt,
    errorKind,
    error: { name: "TurnError", message },
    retryable: false,
  }),
  queued: (traceparent: string) => ({ prompt: "Go.", cwd: "/work", traceparent }),
};
