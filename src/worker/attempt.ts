// One attempt of a leased turn: begin it (a new fencing epoch) and make its Attempt, record earlier
// attempts that never ended as abandoned, prepare (checks, env, snapshot or restore, attempt.started,
// supervision), run the CLI with its output appended as it comes, write cli.exit, and settle how the
// attempt ends. Each step takes the Attempt and gives back what it produced or how the attempt ended.
import type { TurnJob } from "../queue/index.ts";
import { danglingAttempts, DurabilityError, FencedError, LogRolledBackError } from "../log/index.ts";
import type { AttemptAbandonedData } from "../events/index.ts";
import type { Attempt } from "./attempt-context.ts";
import { AttemptEvents } from "./attempt-events.ts";
import { settleAttempt } from "./outcome.ts";
import { prepareAttempt } from "./prepare.ts";
import { failIfQueuedLost, recordRollback } from "./rollback.ts";
import { runCli } from "./run-cli.ts";
import { latestSnapshot, type Snapshot } from "./snapshots.ts";
import type { ParkedTurn } from "./attempt-context.ts";
import type { AttemptControl, AttemptEnd, ExecuteDeps, Restore, RolledBackEnd } from "./types.ts";

/** What a job asks of its next attempt. */
export interface AttemptRequest {
  job: TurnJob;
  control: AttemptControl;
  /** Set when the attempt restores a lost CLI session from the log's transcript. */
  restore: Restore | undefined;
  /** The job's previous attempt stopped on a log that lost its writes (recorded by this one). */
  rolledBack: RolledBackEnd | undefined;
  /** The turn parked: the attempt resumes its deferred call. */
  parked: ParkedTurn | undefined;
}

/** Begins the attempt in the log and makes the Attempt its steps share. */
export async function beginAttempt(worker: ExecuteDeps, request: AttemptRequest): Promise<Attempt> {
  const { job, rolledBack, restore } = request;
  const { session, turn } = job;
  let begun = await worker.log.beginAttempt(session, turn);
  // A rolled-back log may have lost the begins that counted the lost attempt: numbers stay unique.
  while (rolledBack !== undefined && begun.attempt <= rolledBack.attempt)
    begun = await worker.log.beginAttempt(session, turn);
  // The begin returns where the latest snapshot is (read in the same step as the epoch bump, so no
  // fenced attempt can add one behind it): mostly the cache has it and nothing more is read.
  const snapshot: Promise<Snapshot | undefined> =
    restore === undefined
      ? latestSnapshot(worker.log, session, worker.snapshots, begun.lastSnapshot)
      : Promise.resolve(undefined);
  snapshot.catch(() => undefined); // awaited in the preparation unless the attempt ends before it
  const events = new AttemptEvents(worker, job, request.control, begun);
  // A restore starts a fresh CLI session with the transcript: there is no deferred call to resume.
  const parked = restore === undefined ? request.parked : undefined;
  return { worker, job, control: request.control, events, restore, rolledBack, snapshot, parked };
}

/** Runs the attempt's steps inside its span, and says how it ended. */
export async function runAttempt(attempt: Attempt): Promise<AttemptEnd> {
  const end = await attempt.events.run(() => attemptSteps(attempt));
  // A retry must find the snapshot this attempt resumed from, or the log cannot be trusted to resume.
  if (end.kind === "rolled_back") end.snapshotSeq = (await attempt.snapshot.catch(() => undefined))?.seq;
  return end;
}

/** The attempt's steps once it has begun, run inside its span. */
async function attemptSteps(attempt: Attempt): Promise<AttemptEnd> {
  const { worker, control, events } = attempt;
  control.warm = undefined;
  control.access = undefined;
  control.cliTelemetry = undefined;
  try {
    await recordDangling(attempt);
    const lost = attempt.rolledBack === undefined ? undefined : await recordRollback(attempt, attempt.rolledBack);
    if (lost !== undefined) return lost;
    const queuedLost = await failIfQueuedLost(attempt);
    if (queuedLost !== undefined) return queuedLost;
    if (control.reason !== undefined) return await events.stopped();
    const preparation = await prepareAttempt(attempt);
    if ("end" in preparation) return preparation.end;
    const { prepared } = preparation;
    const cli = await runCli(prepared);
    if ("end" in cli) return cli.end;
    await events.write("cli.exit", cli.ran.exit);
    return await settleAttempt(prepared, cli.ran);
  } catch (err) {
    if (err instanceof LogRolledBackError || control.reason === "log_rolled_back") {
      control.ac.abort();
      return events.rolledBack();
    }
    if (err instanceof DurabilityError || control.reason === "log_not_durable") {
      control.ac.abort();
      return await events.notDurable();
    }
    if (err instanceof FencedError || control.reason === "fenced") {
      control.ac.abort();
      return { kind: "stopped", attempt: events.attempt, reason: "fenced" };
    }
    throw err;
  } finally {
    // A fenced, failed, stopped or retried attempt ends its process: only a clean finish keeps one.
    worker.warm.release(control.warm);
    // The run's token ends with it (a kept warm process keeps its own until it ends).
    worker.access?.close(control.access, control.warm);
    worker.cliTelemetry?.close(control.cliTelemetry, control.warm);
    events.endObservers(control.reason ?? "worker_error");
  }
}

/** Earlier attempts of the turn that never ended (their worker died) are recorded abandoned, for a retry. */
async function recordDangling(attempt: Attempt): Promise<void> {
  const { worker, job, events } = attempt;
  for (const dangling of await danglingAttempts(worker.log, job.session, job.turn, events.attempt)) {
    // The rolled-back attempt is recorded with its own reason.
    if (dangling === attempt.rolledBack?.attempt) continue;
    const abandoned: AttemptAbandonedData = {
      reason: "worker_crashed",
      attempt: dangling,
      retry: true,
      detectedBy: events.attempt,
    };
    await events.write("attempt.abandoned", abandoned);
  }
}
