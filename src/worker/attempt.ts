// One attempt of a leased turn: begin it (a new fencing epoch), record earlier attempts that never
// ended as abandoned, prepare (checks, env, snapshot or replay, attempt.started, supervision), run the
// CLI with its output appended as it comes, write cli.exit, and settle how the attempt ends.
import type { TurnJob } from "../queue/index.ts";
import { DurabilityError, FencedError, LogRolledBackError } from "../log/index.ts";
import type { AttemptAbandonedData } from "../events/index.ts";
import { AttemptEvents } from "./attempt-events.ts";
import { danglingAttempts, latestSnapshot } from "./log-scan.ts";
import { settleAttempt } from "./outcome.ts";
import { prepareAttempt } from "./prepare.ts";
import { failIfQueuedLost, recordRollback } from "./rollback.ts";
import { runCli } from "./run-cli.ts";
import type { Snapshot } from "./snapshots.ts";
import type { AttemptControl, AttemptEnd, ExecuteDeps, Replay, RolledBackEnd } from "./types.ts";

/** `rolledBack`: the previous attempt of this job stopped on a log that lost its writes (recorded by this one). */
export async function runAttempt(
  deps: ExecuteDeps,
  job: TurnJob,
  ctl: AttemptControl,
  replay: Replay | undefined,
  rolledBack?: RolledBackEnd,
): Promise<AttemptEnd> {
  const { session, turn } = job;
  let begun = await deps.log.beginAttempt(session, turn);
  // A rolled-back log may have lost the begins that counted the lost attempt: numbers stay unique.
  while (rolledBack !== undefined && begun.attempt <= rolledBack.attempt)
    begun = await deps.log.beginAttempt(session, turn);
  // The begin returns where the latest snapshot is (read in the same step as the epoch bump, so no
  // fenced attempt can add one behind it): mostly the cache has it and nothing more is read.
  const snapshotRead: Promise<Snapshot | undefined> =
    replay === undefined
      ? latestSnapshot(deps.log, session, deps.snapshots, begun.lastSnapshot)
      : Promise.resolve(undefined);
  snapshotRead.catch(() => undefined); // awaited in the preparation unless the attempt ends before it
  const events = new AttemptEvents(deps, job, ctl, begun);
  const end = await events.run(() => attemptSteps(deps, job, ctl, { replay, rolledBack }, events, snapshotRead));
  // A retry must find the snapshot this attempt resumed from, or the log cannot be trusted to resume.
  if (end.kind === "rolled_back") end.snapshotSeq = (await snapshotRead.catch(() => undefined))?.seq;
  return end;
}

/** The attempt's steps once it has begun, run inside its span. */
async function attemptSteps(
  deps: ExecuteDeps,
  job: TurnJob,
  ctl: AttemptControl,
  before: { replay: Replay | undefined; rolledBack: RolledBackEnd | undefined },
  events: AttemptEvents,
  snapshotRead: Promise<Snapshot | undefined>,
): Promise<AttemptEnd> {
  const { session, turn } = job;
  const { replay, rolledBack } = before;
  ctl.warm = undefined;
  ctl.access = undefined;
  try {
    for (const a of await danglingAttempts(deps.log, session, turn, events.attempt)) {
      if (a === rolledBack?.attempt) continue;
      const abandoned: AttemptAbandonedData = {
        reason: "worker_crashed",
        attempt: a,
        retry: true,
        detectedBy: events.attempt,
      };
      await events.write("attempt.abandoned", abandoned);
    }
    const lost =
      rolledBack === undefined ? undefined : await recordRollback(deps, job, events, rolledBack, snapshotRead);
    if (lost !== undefined) return lost;
    const queuedLost = await failIfQueuedLost(deps, job, events);
    if (queuedLost !== undefined) return queuedLost;
    if (ctl.reason !== undefined) return await events.stopped();
    const prepared = await prepareAttempt(deps, job, ctl, events, snapshotRead, replay);
    if ("end" in prepared) return prepared.end;
    const cli = await runCli(deps, job, ctl, events, prepared.run);
    if ("end" in cli) return cli.end;
    await events.write("cli.exit", cli.ran.exit);
    return await settleAttempt(deps, job, ctl, events, prepared.run, cli.ran, replay);
  } catch (err) {
    if (err instanceof LogRolledBackError || ctl.reason === "log_rolled_back") {
      ctl.ac.abort();
      return events.rolledBack();
    }
    if (err instanceof DurabilityError || ctl.reason === "log_not_durable") {
      ctl.ac.abort();
      return await events.notDurable();
    }
    if (err instanceof FencedError || ctl.reason === "fenced") {
      ctl.ac.abort();
      return { kind: "stopped", attempt: events.attempt, reason: "fenced" };
    }
    throw err;
  } finally {
    // A fenced, failed, stopped or retried attempt ends its process: only a clean finish keeps one.
    deps.warm.release(ctl.warm);
    // The run's token ends with it (a kept warm process keeps its own until it ends).
    deps.access?.close(ctl.access, ctl.warm);
    events.endObservers(ctl.reason ?? "worker_error");
  }
}
