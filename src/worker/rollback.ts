// The attempt after one whose writer found the log rolled back (Redis lost writes it had
// acknowledged: a failover to a replica that had not received them). It records the lost attempt
// abandoned with its own reason at the log's real head, then runs the turn again from the snapshot
// that attempt resumed from, as after a crash; if the log lost that snapshot too, resuming would
// silently drop the conversation, so the turn fails instead, saying what happened.
import type { AttemptAbandonedData } from "../events/index.ts";
import type { Attempt } from "./attempt-context.ts";
import type { AttemptEnd, RolledBackEnd } from "./types.ts";

/** The abandonment reason and the turn's error kind when the log lost what it had acknowledged. */
export const LOG_ROLLED_BACK = "log_rolled_back";
export const LOG_LOST = "log_lost";

/** Records `lost` abandoned; returns the turn's failure when its snapshot is gone too, else undefined (run on). */
export async function recordRollback(attempt: Attempt, lost: RolledBackEnd): Promise<AttemptEnd | undefined> {
  const { worker, events } = attempt;
  const { session, turn } = attempt.job;
  // The cache may hold a session file the log no longer has.
  worker.snapshots?.delete(session);
  const snapshot = lost.snapshotSeq === undefined ? undefined : await attempt.snapshot;
  const snapshotGone = lost.snapshotSeq !== undefined && snapshot?.seq !== lost.snapshotSeq;
  const where = { session, turn, attempt: lost.attempt, ackedSeq: lost.ackedSeq, lastSeq: lost.lastSeq };
  worker.logger.error(
    { ...where, snapshotSeq: lost.snapshotSeq, snapshotGone },
    snapshotGone
      ? "the event log lost acknowledged writes and the snapshot the turn resumes from: failing the turn"
      : "the event log lost acknowledged writes: running the turn again from the last snapshot it holds",
  );
  const abandoned: AttemptAbandonedData = {
    reason: LOG_ROLLED_BACK,
    attempt: lost.attempt,
    retry: !snapshotGone,
    detectedBy: events.attempt,
  };
  await events.write("attempt.abandoned", abandoned);
  if (!snapshotGone) return undefined;
  const message =
    `Redis lost writes it had acknowledged (a failover to a replica that had not received them, or a restart ` +
    `without its data): attempt ${lost.attempt} had been told the log held seq ${lost.ackedSeq}, the log is at ` +
    `seq ${lost.lastSeq}, and the session snapshot at seq ${lost.snapshotSeq} the turn resumes from is gone, ` +
    `so the turn cannot run again without losing the conversation; check Redis replication and persistence`;
  return events.fail(LOG_LOST, "LogRolledBack", message);
}

/**
 * The turn's failure when the log began this attempt below the turn's own turn.queued (the job carries
 * its seq): Redis lost the turn's record and everything after it, which a run would silently follow.
 */
export async function failIfQueuedLost(attempt: Attempt): Promise<AttemptEnd | undefined> {
  const { job, events } = attempt;
  if (events.startSeq >= job.queuedSeq) return undefined;
  attempt.worker.logger.error(
    { session: job.session, turn: job.turn, queuedSeq: job.queuedSeq, lastSeq: events.startSeq },
    "the event log lost the turn's turn.queued",
  );
  const message =
    `Redis lost writes it had acknowledged (a failover to a replica that had not received them, or a restart ` +
    `without its data): the turn was queued at seq ${job.queuedSeq} but the log is at seq ${events.startSeq}; ` +
    `check Redis replication and persistence, then enqueue the turn again`;
  return events.fail(LOG_LOST, "LogRolledBack", message);
}
