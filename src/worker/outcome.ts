// How an attempt whose CLI ran ends: the verdict (a pure function of what happened), then the events
// that record it. Finished: the session snapshot, session.replaced when the run restored a lost
// session or left its CLI session behind in another cwd, turn.finished (with what the turn cost). A
// lost session: restore it once from the log's transcript when the session allows, else fail. A
// retryable failure below the attempt limit: abandon the attempt and retry later. A run that ended on
// the call its hook deferred parks the turn (park.ts). Else: turn.failed.
import type { TurnOutcome } from "../runner/index.ts";
import { costAdded, type FailureKind, type SessionReplacedData, type TurnFinishedData } from "../events/index.ts";
import { retryHints } from "../protocol/index.ts";
import { lostSessionPolicyOf } from "../queue/index.ts";
import type { CliRun, PreparedAttempt } from "./attempt-context.ts";
import { errFields } from "./error-fields.ts";
import { retryDelayMs } from "./retry.ts";
import { writeSnapshot } from "./session-snapshot.ts";
import { deferredCallOf, parkTurn } from "./park.ts";
import type { AttemptEnd } from "./types.ts";

export type Verdict =
  | { kind: "stopped" }
  | { kind: "finished"; outcome: TurnOutcome }
  | { kind: "restore" }
  | { kind: "retry"; errorKind: FailureKind }
  | { kind: "failed"; errorKind: FailureKind; name: string; message: string; retryable: boolean };

export interface RunFacts {
  /** Set when the attempt was stopped from outside while the CLI ran. */
  stopped: boolean;
  outputLimitExceeded: string | undefined;
  outcome: TurnOutcome | undefined;
  failure: unknown;
  /** The attempt's number, runs that ended by parking not counted. */
  attempt: number;
  maxAttempts: number;
  /** This run already restores a lost session. */
  restoring: boolean;
  /** The session's lost-session policy, `fail` or `restore` (asked only when the CLI lost its session). */
  lostSessionPolicy: string | undefined;
  /** A snapshot was restored for this run. */
  restored: boolean;
}

export function verdict(facts: RunFacts): Verdict {
  if (facts.stopped) return { kind: "stopped" };
  // Even when the CLI got its result out before the kill: the log holds only part of the run.
  if (facts.outputLimitExceeded !== undefined)
    return {
      kind: "failed",
      errorKind: "output_limit",
      name: "OutputLimitExceeded",
      message: facts.outputLimitExceeded,
      retryable: false,
    };
  if (facts.outcome !== undefined) return { kind: "finished", outcome: facts.outcome };
  const fields = errFields(facts.failure);
  if (fields.kind === "lost_session") {
    if (lostSessionPolicyOf(facts.lostSessionPolicy) === "restore" && !facts.restoring) return { kind: "restore" };
    const why = facts.restored ? "the restored session file was not accepted" : "no session snapshot to restore";
    return {
      kind: "failed",
      errorKind: "lost_session",
      name: fields.name,
      message: `${fields.message} (${why})`,
      retryable: false,
    };
  }
  if (fields.retryable && facts.attempt < facts.maxAttempts) return { kind: "retry", errorKind: fields.kind };
  return {
    kind: "failed",
    errorKind: fields.kind,
    name: fields.name,
    message: fields.message,
    retryable: fields.retryable,
  };
}

/** Decides how the attempt ends and records it. */
export async function settleAttempt(attempt: PreparedAttempt, ran: CliRun): Promise<AttemptEnd> {
  const { worker, job, events, run } = attempt;
  const stopped = attempt.control.reason !== undefined;
  // The session's policy is read only when the verdict depends on it.
  const lost =
    !stopped &&
    ran.outputLimitExceeded === undefined &&
    ran.outcome === undefined &&
    errFields(ran.failure).kind === "lost_session";
  const decided = verdict({
    stopped,
    outputLimitExceeded: ran.outputLimitExceeded,
    outcome: ran.outcome,
    failure: ran.failure,
    attempt: events.attempt - (attempt.parked?.parks ?? 0),
    maxAttempts: worker.settings.retry.maxAttempts,
    restoring: attempt.restore !== undefined,
    lostSessionPolicy: lost
      ? (job.onLostSession ?? (await worker.order.onLostSession(job.session)) ?? "fail")
      : undefined,
    restored: run.snapshot !== undefined,
  });
  const refused = decided.kind === "stopped" ? undefined : tenantRefusal(attempt, decided);
  if (refused !== undefined) return events.fail(refused.errorKind, refused.name, refused.message);
  switch (decided.kind) {
    case "stopped":
      return events.stopped();
    case "finished": {
      const deferred = deferredCallOf(attempt, decided.outcome);
      if (typeof deferred === "string") return events.fail("cli_error", "UnexpectedDeferral", deferred);
      if (deferred !== undefined) return parkTurn(attempt, decided.outcome, deferred);
      return finishTurn(attempt, decided.outcome);
    }
    case "restore":
      await events.abandon("lost_session", true);
      await events.close();
      return { kind: "restore", attempt: events.attempt, previous: run.resume };
    case "retry": {
      const delayMs = retryDelayMs(worker.settings.retry, events.attempt, retryHints(ran.hints));
      await events.abandon(decided.errorKind, true, delayMs);
      await events.close();
      return { kind: "retry", attempt: events.attempt, delayMs };
    }
    case "failed":
      return events.fail(decided.errorKind, decided.name, decided.message, decided.retryable);
  }
}

/**
 * A turn whose model call the gateway refused for its tenant's limits ends with the tenant's error
 * kind, whatever the CLI made of the refusal: it is not the agent's failure, and not worth a retry now.
 */
function tenantRefusal(
  attempt: PreparedAttempt,
  decided: Verdict,
): { errorKind: FailureKind; name: string; message: string } | undefined {
  const code = attempt.events.policyRefusal;
  const tenant = attempt.job.tenant ?? "";
  if (decided.kind === "failed" && decided.errorKind === "max_budget" && attempt.control.budgetCappedByTenant === true)
    return {
      errorKind: "tenant_budget",
      name: "TenantOverBudget",
      message: `tenant ${tenant} spent its 24-hour budget during the turn: the CLI stopped at what the tenant had left ($${String(attempt.job.options.maxBudgetUsd)})`,
    };
  if (code === "tenant_budget")
    return {
      errorKind: "tenant_budget",
      name: "TenantOverBudget",
      message: `tenant ${tenant} spent its 24-hour budget during the turn; the gateway refused its next model call`,
    };
  if (code === "tenant_limits")
    return {
      errorKind: "tenant_limits",
      name: "TenantLimitsInvalid",
      message: `tenant ${tenant}'s limits could not be checked; the gateway refused the turn's model call`,
    };
  return undefined;
}

/**
 * Names this worker the session's warm owner for the hand-off window, so another worker that takes
 * the next job hands it back (execute.ts). Said before turn.finished: a producer that sees the turn
 * end and enqueues the next one at once must already find it.
 */
async function claimWarmOwner(attempt: PreparedAttempt): Promise<void> {
  const { worker, job } = attempt;
  await worker.order
    .setWarmOwner(job.session, worker.settings.workerId, worker.warm.handoffMs)
    .catch((err: unknown) => {
      worker.logger.warn(
        { session: job.session, err: { message: (err as Error).message } },
        "could not name this worker the session's warm owner",
      );
    });
}

async function finishTurn(attempt: PreparedAttempt, outcome: TurnOutcome): Promise<AttemptEnd> {
  const { worker, job, control, events, run } = attempt;
  const cliSessionId = outcome.sessionId;
  const total = outcome.result["total_cost_usd"];
  const costTotalUsd = typeof total === "number" && total >= 0 ? total : undefined;
  const written = await writeSnapshot(attempt, outcome, costTotalUsd);
  await writeReplaced(attempt, cliSessionId);
  const fin: TurnFinishedData = { attempt: events.attempt, durationMs: outcome.durationMs };
  if (cliSessionId !== undefined) fin.cliSessionId = cliSessionId;
  // A turn that parked ran in several runs: it cost what they did together.
  if (costTotalUsd !== undefined)
    fin.costUsd = costAdded(run.costBaseUsd ?? 0, costTotalUsd) + (attempt.parked?.costUsd ?? 0);
  // Plain text, not a JSON line: the run's full scrubber, like stderr and error messages.
  if (outcome.resultText !== undefined)
    fin.resultText = worker.settings.keepRawLines ? outcome.resultText : events.scrubMessage(outcome.resultText);
  const warm =
    written !== undefined && control.warm?.viaProcess === true && control.warm.process?.alive === true
      ? control.warm
      : undefined;
  if (warm !== undefined) await claimWarmOwner(attempt);
  await events.write("turn.finished", fin);
  await events.close();
  // Appended (close would have thrown otherwise): the next turn of the session may start from it.
  if (written !== undefined) worker.snapshots?.set(job.session, events.epoch, written.at, written.snapshot);
  if (warm !== undefined && written !== undefined) worker.warm.keep(job.session, warm, events.epoch, written.at);
  return { kind: "finished", attempt: events.attempt, cliSessionId };
}

/**
 * session.replaced when the run started a fresh CLI session in place of the session's: it was lost, or its cwd changed.
 */
async function writeReplaced(attempt: PreparedAttempt, cliSessionId: string | undefined): Promise<void> {
  const { worker, job, events, run, restore } = attempt;
  const why = restore !== undefined ? { reason: "lost_session", previous: restore.previous } : run.fresh;
  if (why === undefined) return;
  const replaced: SessionReplacedData = { by: "worker", reason: why.reason, turns: run.restoredTurns };
  if (why.previous !== undefined) replaced.previousCliSessionId = why.previous;
  if (cliSessionId !== undefined) replaced.cliSessionId = cliSessionId;
  await events.write("session.replaced", replaced);
  const { session, turn } = job;
  if (restore !== undefined)
    worker.logger.warn(
      { session, turn, turns: run.restoredTurns },
      "CLI session was lost; started a fresh one carrying the transcript from the log",
    );
  else
    worker.logger.info(
      { session, turn, previous: why.previous },
      "the turn's cwd differs from the one its CLI session ran in; started a fresh CLI session",
    );
}
