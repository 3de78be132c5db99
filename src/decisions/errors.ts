// Typed errors of supervised mode. Messages say what to change; none carries a token or tool input.

export class InvalidRuleError extends Error {
  readonly pattern: string;
  constructor(pattern: string, hint: string) {
    super(`trust rule ${JSON.stringify(pattern.slice(0, 200))} is not valid: ${hint}`);
    this.name = "InvalidRuleError";
    this.pattern = pattern;
  }
}

export type DecideProblem = "not_found" | "already_decided" | "abandoned" | "expired";

export class DecisionError extends Error {
  readonly problem: DecideProblem;
  readonly session: string;
  readonly requestId: string;
  constructor(problem: DecideProblem, session: string, requestId: string, message: string) {
    super(message);
    this.name = "DecisionError";
    this.problem = problem;
    this.session = session;
    this.requestId = requestId;
  }
}

export class HubClosedError extends Error {
  constructor() {
    super("the decision hub is closed; start a new one with startDecisionHub before preparing a supervised run");
    this.name = "HubClosedError";
  }
}
