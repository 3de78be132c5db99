// Whether an attempt failed, and why, decided when its spans end. The CLI's own verdict (its last
// result, classified by the protocol's RunClassifier) outranks the worker's events: a run that hit a
// rate limit is `rate_limit` even when the worker then fails the turn for it.
import { dataOf } from "../../events/index.ts";
import type { ErrorKind } from "../../protocol/index.ts";

export interface Failure {
  readonly kind: string;
  readonly message: string | undefined;
}

/**
 * The failure a turn.failed, turn.cancelled or attempt.abandoned event reports (its message only when the event has
 * one).
 */
export function failureOfEndEvent(kind: string, data: unknown): Failure {
  switch (kind) {
    case "turn.failed": {
      const failed = dataOf("turn.failed", data);
      return { kind: failed?.errorKind ?? "failed", message: failed?.error.message };
    }
    case "turn.cancelled":
      // Its reason is prose ("cancelled while running"), not a kind.
      return { kind: "cancelled", message: undefined };
    default:
      return { kind: dataOf("attempt.abandoned", data)?.reason ?? "abandoned", message: undefined };
  }
}

export interface AttemptEnd {
  /** Why the attempt was ended from outside (fenced, crashed, timeout…), when it was. */
  readonly reason: string | undefined;
  /** The classified kind of the last result; undefined when the run printed none. */
  readonly resultKind: ErrorKind | undefined;
  /** The last result's error text. */
  readonly resultErrorText: string | undefined;
  /** What a terminal event (turn.failed, turn.cancelled, attempt.abandoned) reported. */
  readonly endEvent: Failure | undefined;
  /** Whether the CLI's exit was seen. */
  readonly exited: boolean;
}

/** The attempt's error kind and status message, or undefined when it did not fail. */
export function attemptFailure(end: AttemptEnd): { kind: string; message: string } | undefined {
  const kind = end.reason ?? failureKind(end);
  if (kind === undefined || kind === "ok") return undefined;
  return { kind, message: end.endEvent?.message ?? end.resultErrorText ?? `attempt failed: ${kind}` };
}

function failureKind(end: AttemptEnd): string | undefined {
  if (end.resultKind !== undefined && end.resultKind !== "ok") return end.resultKind;
  if (end.endEvent !== undefined) return end.endEvent.kind;
  if (end.resultKind === undefined && end.exited) return "no_result";
  return undefined;
}
