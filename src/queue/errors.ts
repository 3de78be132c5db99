// Typed errors of the producer. Messages name the field to change and never carry prompt or env values.

/** An enqueue request or a job record does not match the schema; `field` is the dotted path. */
export class InvalidTurnError extends Error {
  override readonly name = "InvalidTurnError";
  readonly field: string;
  readonly issues: readonly string[];
  constructor(field: string, problem: string, issues: readonly string[] = []) {
    super(`invalid turn: \`${field}\` ${problem}`);
    this.field = field;
    this.issues = issues;
  }
}

/** A `{{placeholder}}` in the prompt has no value in `variables`. */
export class MissingVariableError extends Error {
  override readonly name = "MissingVariableError";
  readonly placeholder: string;
  constructor(placeholder: string) {
    super(
      `prompt placeholder {{${placeholder}}} has no value: add \`variables.${placeholder}\` or remove the placeholder`,
    );
    this.placeholder = placeholder;
  }
}

/** The turn id is unknown to the queue (never enqueued, or its job record expired). */
export class UnknownTurnError extends Error {
  override readonly name = "UnknownTurnError";
  readonly turn: string;
  constructor(turn: string) {
    super(`turn ${turn} is not known to the queue; pass its session as well (waitForTurn(turn, { session }))`);
    this.turn = turn;
  }
}

export class WaitTimeoutError extends Error {
  override readonly name = "WaitTimeoutError";
  readonly turn: string;
  constructor(turn: string, ms: number) {
    super(`turn ${turn} did not end within ${ms} ms; raise timeoutMs or check that a worker is running`);
    this.turn = turn;
  }
}
