// The one base of turnstream's errors: a stable machine-readable `code` beside the message, whether
// trying again can succeed, and `name` the class's own name, so a subclass only passes its code.

export interface TurnstreamErrorOptions {
  /** What went wrong, for programs: a failure kind (`bad_cwd`, `rate_limit`…) or a system code. */
  code: string;
  /** Trying the same thing again can succeed. Default false. */
  retryable?: boolean | undefined;
  /** The error this one reports (Error's `cause`). */
  cause?: unknown;
}

export class TurnstreamError extends Error {
  readonly code: string;
  readonly retryable: boolean;

  constructor(message: string, options: TurnstreamErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    // An own property, as a class field would make it, so loggers that copy own fields keep it.
    this.name = new.target.name;
    this.code = options.code;
    this.retryable = options.retryable ?? false;
  }
}
