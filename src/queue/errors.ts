// Typed errors of the producer. Messages name the field to change and never carry prompt or env values.
import { TurnstreamError } from "../kernel/index.ts";

/** An enqueue request or a job record does not match the schema; `field` is the dotted path. */
export class InvalidTurnError extends TurnstreamError {
  readonly field: string;
  readonly issues: readonly string[];
  constructor(field: string, problem: string, issues: readonly string[] = []) {
    super(`invalid turn: \`${field}\` ${problem}`, { code: "invalid_turn" });
    this.field = field;
    this.issues = issues;
  }
}

/** A `{{placeholder}}` in the prompt has no value in `variables`. */
export class MissingVariableError extends TurnstreamError {
  readonly placeholder: string;
  constructor(placeholder: string) {
    super(
      `prompt placeholder {{${placeholder}}} has no value: add \`variables.${placeholder}\` or remove the placeholder`,
      { code: "missing_variable" },
    );
    this.placeholder = placeholder;
  }
}

/** The turn id is unknown to the queue (never enqueued, or its job record expired). */
export class UnknownTurnError extends TurnstreamError {
  readonly turn: string;
  constructor(turn: string) {
    super(`turn ${turn} is not known to the queue; pass its session as well (waitForTurn(turn, { session }))`, {
      code: "unknown_turn",
    });
    this.turn = turn;
  }
}

export class WaitTimeoutError extends TurnstreamError {
  readonly turn: string;
  constructor(turn: string, ms: number) {
    super(`turn ${turn} did not end within ${ms} ms; raise timeoutMs or check that a worker is running`, {
      code: "wait_timeout",
      retryable: true,
    });
    this.turn = turn;
  }
}

/** Retention removed the session each time between the producer's restore and its register step. */
export class SessionRemovedWhileEnqueuingError extends TurnstreamError {
  readonly session: string;
  constructor(session: string, tries: number) {
    super(
      `session ${session} was removed from Redis by retention ${tries} times while the turn was being enqueued; ` +
        `nothing was enqueued: enqueue again, or raise TURNSTREAM_RETENTION so the session is not retired while in use`,
      { code: "session_removed_while_enqueuing" },
    );
    this.session = session;
  }
}
