// The failure vocabulary: every kind a run or a turn can end with (the classifier's, the CLI runner's,
// the worker's), and for each whether the worker retries it, the outcome class it counts as and so the
// exit code of `turnstream run --wait`. The CLI runner, the worker, the event schema and the
// `turnstream` command all read this one table; docs/reference is generated from its descriptions.
import { z as zod } from "zod";
import type { ErrorKind as ClassifiedKind } from "../protocol/index.ts";

/**
 * How a turn ended, as a pipeline sees it (`outcome` in `run --wait --json`). `parked` is not an end:
 * the command stopped following a turn that parked because it was asked to (`--exit-on-park`).
 */
export type Outcome =
  "finished" | "task_failed" | "usage" | "infrastructure" | "cancelled" | "timed_out" | "parked" | "over_budget";

/** The exit code of every `turnstream` command, by what it means. */
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
  /**
   * The turn parked on a supervised call and waits for an operator's decision; the command stopped
   * following it as asked (`--exit-on-park`). Not a failure: the turn resumes once decided.
   */
  parked: 5,
  /**
   * The turn's tenant is over its budget (or its limits could not be checked): not the agent's fault,
   * and not worth retrying now; it runs again once the tenant's spend ages out or an operator raises it.
   */
  overBudget: 6,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/**
 * The exit code of a command a signal stopped while it followed a turn (`run --wait`): 128 plus the
 * signal's number, what a shell reports for a process that signal ended, so a CI runner that cancels
 * a job sees the stop it asked for, not a verdict on the turn. The turn itself goes on unless the
 * command cancelled it (`--cancel-on-interrupt`).
 */
export const EXIT_ON_SIGNAL = { SIGINT: 130, SIGTERM: 143 } as const;

/** A signal a following command stops on. */
export type StopSignal = keyof typeof EXIT_ON_SIGNAL;

/** What each stop signal usually means, for the reference. */
export const STOP_SIGNAL_MEANINGS: Readonly<Record<StopSignal, string>> = {
  SIGINT: "Ctrl-C in a terminal. The command stopped following the turn; it says how to cancel the turn.",
  SIGTERM:
    "A CI runner or supervisor stopped the command (a cancelled job). With `--cancel-on-interrupt` the turn was cancelled first.",
};

export const EXIT_CODE_OF_OUTCOME: Readonly<Record<Outcome, ExitCode>> = {
  finished: EXIT.finished,
  task_failed: EXIT.taskFailed,
  usage: EXIT.usage,
  infrastructure: EXIT.infrastructure,
  cancelled: EXIT.cancelledOrTimedOut,
  timed_out: EXIT.cancelledOrTimedOut,
  parked: EXIT.parked,
  over_budget: EXIT.overBudget,
};

/** What each outcome tells a pipeline (the exit-code reference is generated from this). */
export const OUTCOME_MEANINGS: Readonly<Record<Outcome, string>> = {
  finished: "The turn finished, or the command did what it was asked.",
  task_failed: "The agent failed the task on its own terms. Retrying the same request fails the same way.",
  usage: "The call is wrong: bad flags or arguments, or a request the schema or the worker refuses. Fix it.",
  infrastructure: "Redis, the worker fleet or the API did not hold up. Retry the job.",
  cancelled: "The turn was cancelled.",
  timed_out: "A timeout ended it: the wait's, the turn's own, its inactivity limit or the worker's maximum.",
  parked:
    "The turn parked on a supervised call and waits for an operator's decision; asked to (`--exit-on-park`), the command stopped following it. It resumes once decided.",
  over_budget:
    "The turn's tenant is over its 24-hour budget, or its limits could not be checked. Not the agent's fault and not worth retrying now: run it once the tenant's spend ages out or an operator raises the budget (`turnstream tenants`).",
};

export interface FailureKindInfo {
  /** The worker tries the turn again (up to its attempt limit) when an attempt ends with this kind. */
  readonly retryable: boolean;
  readonly outcome: Outcome;
  /** One sentence for a reader of the reference docs. */
  readonly description: string;
}

const taskFailed = (description: string): FailureKindInfo => ({
  retryable: false,
  outcome: "task_failed",
  description,
});
const overBudget = (description: string): FailureKindInfo => ({
  retryable: false,
  outcome: "over_budget",
  description,
});
const usage = (description: string): FailureKindInfo => ({ retryable: false, outcome: "usage", description });
const infrastructure = (retryable: boolean, description: string): FailureKindInfo => ({
  retryable,
  outcome: "infrastructure",
  description,
});

/** Every error kind turnstream records, in one place. */
export const FAILURE_KINDS_TABLE = {
  ok: { retryable: false, outcome: "finished", description: "The CLI printed a successful result." },

  // The agent's own ending: the same request ends the same way.
  max_turns: taskFailed("The agent used every turn the request allowed (`maxTurns`) without finishing."),
  max_budget: taskFailed("The agent spent the request's whole budget (`maxBudgetUsd`) without finishing."),
  invalid_request: taskFailed(
    "The API refused the request as invalid (a 4xx other than auth or rate limit); sending it again fails the same way.",
  ),
  error_result: taskFailed("The CLI ended with an error result that no API failure explains."),
  output_limit: taskFailed(
    "The run printed more than the worker allows (its options maxOutputLines and maxOutputBytes); its process tree was ended.",
  ),
  // A run limit of the worker's (or the job's lower one): the same request goes past it again.
  limit_pids: taskFailed("The run started more processes than its limit allows; its process tree was ended."),
  limit_memory: taskFailed("The run used more memory than its limit allows; its process tree was ended."),
  limit_disk: taskFailed("The run wrote more to its scratch space than its limit allows; its process tree was ended."),

  // The tenant's limits, set by an operator: not the agent's fault, not worth retrying now.
  tenant_budget: overBudget(
    "The turn's tenant spent its 24-hour budget: the turn did not start (its tenant's policy is `fail`) or its next model call was refused.",
  ),
  tenant_limits: overBudget(
    "The turn's tenant has limits this worker cannot enforce: they do not verify against its operator keys, or they set a budget and the worker runs without its model gateway.",
  ),

  // The request itself is wrong: fix the call.
  bad_payload: usage("The job's payload does not match the turn schema; fix the request."),
  bad_options: usage(
    "The turn's options were refused (an invalid option, a sandbox or supervision the worker cannot give, a workspace path it will not write); fix the request.",
  ),
  workspace_not_allowed: usage("The turn's cwd is outside the worker's workspace roots (TURNSTREAM_WORKSPACE_ROOTS)."),
  bad_cwd: usage("The turn's cwd is missing or not a directory on the worker."),

  // Transient or fleet-side: the worker retried the retryable ones; a new job may succeed.
  rate_limit: infrastructure(true, "The API rate-limited the request."),
  overloaded: infrastructure(true, "The API answered that it is overloaded."),
  server_error: infrastructure(true, "The API failed with a server error (5xx)."),
  no_result: infrastructure(
    true,
    "The CLI ended without a result line: it crashed, or a signal turnstream did not send (the OOM killer, an operator's kill) ended it.",
  ),
  lost_session: infrastructure(
    false,
    "The CLI could not find the session to resume, and no snapshot restored it (or the session's policy is to fail).",
  ),
  cli_error: infrastructure(false, "The CLI could not be started or run, or failed in a way no other kind names."),
  cli_not_found: infrastructure(false, "The claude CLI binary was not found on the worker."),
  // Only ever our own kill(), never an outside signal (that is no_result): test/events/failures.test.ts.
  killed: infrastructure(
    false,
    "The run handle's kill() ended the run's process tree: a stop turnstream or its caller chose, so it is not retried.",
  ),
  auth: infrastructure(
    false,
    "The API refused the worker's credentials (expired, revoked or unpaid); the same job succeeds once an operator fixes them.",
  ),
  gateway: infrastructure(false, "The worker's model gateway could not be opened for the run (it could not listen)."),
  sandbox_unavailable: infrastructure(
    false,
    "The turn's tools must run in a sandbox and this worker cannot provide one (no bwrap).",
  ),
  too_many_attempts: infrastructure(false, "The turn was attempted as many times as the worker allows."),
  abandoned: infrastructure(false, "The turn could no longer run (its job was lost) and was ended by a later worker."),
  log_lost: infrastructure(
    false,
    "Redis lost event-log writes it had acknowledged (a failover or restart without the data), the turn's snapshot among them.",
  ),
  log_not_durable: infrastructure(
    false,
    "Appends could not be confirmed at TURNSTREAM_DURABILITY (replicas or the AOF behind) within the attempt limit.",
  ),

  // Ended by a clock.
  timeout: {
    retryable: true,
    outcome: "timed_out",
    description: "The run went past its timeout (`timeoutMs`).",
  },
  inactivity: {
    retryable: true,
    outcome: "timed_out",
    description: "The run printed nothing for longer than its inactivity limit (`inactivityTimeoutMs`).",
  },
  limit_duration: {
    retryable: false,
    outcome: "timed_out",
    description: "The turn went past the worker's maximum turn duration (or the job's lower one); not retried.",
  },
  aborted: { retryable: false, outcome: "cancelled", description: "The caller's abort signal ended the run." },
} as const satisfies Record<string, FailureKindInfo>;

/** Every kind of the table: the classifier's `ok` and every failure. */
export type KnownErrorKind = keyof typeof FAILURE_KINDS_TABLE;
// Every kind the classifier decides has its row (a compile error otherwise).
true satisfies ClassifiedKind extends KnownErrorKind ? true : never;

/** The kinds a turn can fail with: every kind but `ok`. */
export type FailureKind = Exclude<KnownErrorKind, "ok">;

export const ERROR_KINDS = Object.keys(FAILURE_KINDS_TABLE) as [KnownErrorKind, ...KnownErrorKind[]];
export const FAILURE_KINDS = ERROR_KINDS.filter((kind) => kind !== "ok") as [FailureKind, ...FailureKind[]];

/**
 * Kinds older logs hold that turnstream no longer writes, and the kind each reads as. `api_error` was
 * listed as retryable before the classifier folded the API's `api_error` into `server_error`.
 */
export const LEGACY_FAILURE_KINDS: Readonly<Record<string, FailureKind>> = { api_error: "server_error" };

/** A kind a writer may put in `turn.failed`; a reader also accepts a legacy kind, read as its successor. */
export const failureKindSchema = zod.preprocess(
  (value) => (typeof value === "string" ? currentKind(value) : value),
  zod.enum(FAILURE_KINDS),
);

/** A legacy kind's successor; any other kind as it is. */
function currentKind(kind: string): string {
  return Object.hasOwn(LEGACY_FAILURE_KINDS, kind) ? LEGACY_FAILURE_KINDS[kind]! : kind;
}

/** Whether the table has a row for `kind` (`ok` included). */
export function isKnownErrorKind(kind: string): kind is KnownErrorKind {
  return Object.hasOwn(FAILURE_KINDS_TABLE, kind);
}

/** Whether `kind` is one a turn can fail with (any row but `ok`). */
export function isFailureKind(kind: string): kind is FailureKind {
  return kind !== "ok" && isKnownErrorKind(kind);
}

/** Whether the worker tries again after an attempt that ended with this kind (an unknown kind: no). */
export function isRetryableKind(kind: string): boolean {
  const known = currentKind(kind);
  return isKnownErrorKind(known) && FAILURE_KINDS_TABLE[known].retryable;
}

/** The outcome of `kind`; an unknown kind (a newer worker's) counts as infrastructure: retry, then look. */
export function outcomeOfErrorKind(kind: string | undefined): Outcome {
  if (kind === undefined) return "infrastructure";
  const known = currentKind(kind);
  return isKnownErrorKind(known) ? FAILURE_KINDS_TABLE[known].outcome : "infrastructure";
}

/** What a turn's end is for a pipeline: its outcome class and the exit code `turnstream run --wait` gives it. */
export interface TurnVerdict {
  outcome: Outcome;
  exitCode: ExitCode;
}

/** A turn's terminal status and kind, as `Producer.wait` returns them (TurnResult). */
export interface TurnEnding {
  status: "finished" | "failed" | "cancelled";
  errorKind?: string | undefined;
}

/** The verdict `turnstream run --wait` exits with: the terminal status decides first, then a failure's kind. */
export function outcomeOf(result: TurnEnding): TurnVerdict {
  const outcome: Outcome =
    result.status === "finished"
      ? "finished"
      : result.status === "cancelled"
        ? "cancelled"
        : outcomeOfErrorKind(result.errorKind);
  return { outcome, exitCode: EXIT_CODE_OF_OUTCOME[outcome] };
}
