// The exit codes of every `turnstream` command, in one place, so a CI pipeline can tell "the agent
// failed the task" (do not retry; look at the transcript) from "retry this job" (infrastructure).
// docs/reference/exit-codes.md is generated from this module (`npm run docs`).

export type Outcome = "finished" | "task_failed" | "usage" | "infrastructure" | "cancelled" | "timed_out";

export const EXIT = {
  /** The turn finished (or the command did what it was asked). */
  finished: 0,
  /** The agent's turn failed on its own terms: retrying the same request fails the same way. */
  taskFailed: 1,
  /** Bad flags or arguments, a request the schema or the worker refuses: fix the call. */
  usage: 2,
  /** Redis, the worker fleet or the API did not hold up: worth retrying the job. */
  infrastructure: 3,
  /** The turn was cancelled, or a timeout (the wait's or the turn's own) ended it. */
  cancelledOrTimedOut: 4,
} as const;

export const EXIT_CODE_OF_OUTCOME: Readonly<Record<Outcome, number>> = {
  finished: EXIT.finished,
  task_failed: EXIT.taskFailed,
  usage: EXIT.usage,
  infrastructure: EXIT.infrastructure,
  cancelled: EXIT.cancelledOrTimedOut,
  timed_out: EXIT.cancelledOrTimedOut,
};

/** What each outcome tells a pipeline, for the exit-code reference. */
export const OUTCOME_MEANINGS: Readonly<Record<Outcome, string>> = {
  finished: "The turn finished, or the command did what it was asked.",
  task_failed: "The agent failed the task on its own terms. Retrying the same request fails the same way.",
  usage: "The call is wrong: bad flags or arguments, or a request the schema or the worker refuses. Fix it.",
  infrastructure: "Redis, the worker fleet or the API did not hold up. Retry the job.",
  cancelled: "The turn was cancelled.",
  timed_out: "A timeout ended it: the wait's, the turn's own, its inactivity limit or the worker's maximum.",
};

/**
 * The outcome of each error kind a turn can end with: the classifier's kinds (src/protocol/classify.ts),
 * the runner's (src/cli/errors.ts) and the ones the worker writes in turn.failed.
 */
export const OUTCOME_OF_ERROR_KIND: Readonly<Record<string, Outcome>> = {
  ok: "finished",
  // The agent's own ending: the same request would end the same way.
  max_turns: "task_failed",
  max_budget: "task_failed",
  invalid_request: "task_failed",
  output_limit: "task_failed",
  error_result: "task_failed",
  // The turn's own processes went past a limit of the worker's (or the job's lower one): the same
  // request goes past it again. Never retried.
  limit_pids: "task_failed",
  limit_memory: "task_failed",
  limit_disk: "task_failed",
  // The request itself is wrong: fix the call, do not retry it.
  bad_payload: "usage",
  bad_options: "usage",
  workspace_not_allowed: "usage",
  bad_cwd: "usage",
  // Transient or fleet-side: the worker already retried the retryable ones, a new job may succeed.
  rate_limit: "infrastructure",
  overloaded: "infrastructure",
  server_error: "infrastructure",
  api_error: "infrastructure",
  lost_session: "infrastructure",
  no_result: "infrastructure",
  cli_error: "infrastructure",
  cli_not_found: "infrastructure",
  too_many_attempts: "infrastructure",
  abandoned: "infrastructure",
  killed: "infrastructure",
  // Redis lost acknowledged writes, the turn's snapshot among them (src/worker/rollback.ts).
  log_lost: "infrastructure",
  // Appends could not be confirmed at TURNSTREAM_DURABILITY (replicas or the AOF behind) within the attempt limit.
  log_not_durable: "infrastructure",
  // auth is infrastructure, not the task's failure: an expired token, an unpaid bill or a revoked key
  // belongs to the worker's host, and the same job succeeds once an operator fixes the credentials.
  auth: "infrastructure",
  // The turn's own timeout or inactivity limit ended it.
  timeout: "timed_out",
  inactivity: "timed_out",
  // The worker's maximum turn duration (or the job's lower one) ended it; not retried, unlike timeout.
  limit_duration: "timed_out",
  aborted: "cancelled",
};

/** The outcome of a turn that ended with `errorKind`; an unknown kind counts as infrastructure (retry, then look). */
export function outcomeOfErrorKind(errorKind: string | undefined): Outcome {
  if (errorKind === undefined) return "infrastructure";
  return OUTCOME_OF_ERROR_KIND[errorKind] ?? "infrastructure";
}

/** The outcome of a turn's terminal status (turn.finished / turn.failed / turn.cancelled). */
export function outcomeOfTurn(status: "finished" | "failed" | "cancelled", errorKind: string | undefined): Outcome {
  if (status === "finished") return "finished";
  if (status === "cancelled") return "cancelled";
  return outcomeOfErrorKind(errorKind);
}

export function exitCodeOf(outcome: Outcome): number {
  return EXIT_CODE_OF_OUTCOME[outcome];
}
