// Typed errors of supervised mode. Messages say what to change; none carries a token or tool input.
import { TurnstreamError } from "../kernel/index.ts";

export class InvalidRuleError extends TurnstreamError {
  readonly pattern: string;
  constructor(pattern: string, hint: string) {
    super(`trust rule ${JSON.stringify(pattern.slice(0, 200))} is not valid: ${hint}`, { code: "invalid_rule" });
    this.pattern = pattern;
  }
}

/**
 * not_found · already_decided · abandoned · expired; redacted: an allow (or a rule made from the
 * subject) on a request whose shown input had secrets scrubbed out; forbidden: the Redis user may not
 * write decisions.
 */
export type DecideProblem = "not_found" | "already_decided" | "abandoned" | "expired" | "redacted" | "forbidden";

export class DecisionError extends TurnstreamError {
  readonly problem: DecideProblem;
  readonly session: string;
  readonly requestId: string;
  constructor(problem: DecideProblem, session: string, requestId: string, message: string) {
    super(message, { code: "decision" });
    this.problem = problem;
    this.session = session;
    this.requestId = requestId;
  }
}

export class HubClosedError extends TurnstreamError {
  constructor() {
    super("the decision hub is closed; start a new one with startDecisionHub before preparing a supervised run", {
      code: "hub_closed",
    });
  }
}

/** An operator key (private or public) that cannot be used; the message says what to change. */
export class OperatorKeyError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "operator_key" });
  }
}

/** A decision hub needs operator public keys: without them no decision could ever be verified. */
export class OperatorKeysMissingError extends TurnstreamError {
  constructor() {
    super(
      "supervised turns need the operators' public keys to verify decisions: set TURNSTREAM_OPERATOR_KEYS on the worker " +
        "(a file with one key per line, or the keys themselves) or pass operatorKeys to startTurnWorker / startDecisionHub; " +
        "an operator makes a key with `turnstream operator-key new`",
      { code: "operator_keys_missing" },
    );
  }
}
