// Which CLI session an attempt continues. The latest snapshot's, as a rule: its file is restored
// into the run's config home and the CLI resumes it. But the CLI keeps a conversation under its
// cwd's project folder, and a turn enqueued with another cwd is a new conversation there (the
// library's runThreadTurn treats it so too): resuming the old one would show the model a
// conversation held somewhere else. Such a turn starts a fresh CLI session, says why
// (`cwd_changed` in attempt.started, session.replaced once it finished), and the log keeps the
// session's history as it was. A run that restores a lost session resumes nothing and carries the
// session's finished turns as a transcript instead.
import { sameCwd, type FreshReason as CliFreshReason } from "../runner/index.ts";
import { numberField, stringField } from "../kernel/index.ts";
import { cliLinesBetween, finishedTurns, lastCliSessionId, writerCwd, type EventLog } from "../log/index.ts";
import { isKnown, parseLine, renderText } from "../protocol/index.ts";
import type { TurnJob } from "../queue/index.ts";
import { restoredCostTotal, type Snapshot } from "./snapshots.ts";

/** Why the session's CLI session is not continued (the library's name for it, src/runner/sessions.ts). */
export type FreshReason = Extract<CliFreshReason, "cwd_changed">;

export interface ResumePlan {
  /** The CLI session to resume. */
  resume: string | undefined;
  /** The snapshot this run restores (its file is restored when `resume` is its session). */
  snapshot: Snapshot | undefined;
  /** Set when the session had a CLI session this attempt does not continue. */
  fresh: { reason: FreshReason; previous: string } | undefined;
}

/** The plan of an attempt that restores a lost session: a fresh CLI session, the transcript in its prompt. */
export const RESTORE_PLAN: ResumePlan = { resume: undefined, snapshot: undefined, fresh: undefined };

/**
 * Decides what the attempt resumes, from the session's latest snapshot (or, without one, the last CLI session id it
 * reported).
 */
export async function planResume(log: EventLog, job: TurnJob, snapshot: Snapshot | undefined): Promise<ResumePlan> {
  if (snapshot === undefined)
    return { resume: await lastCliSessionId(log, job.session), snapshot: undefined, fresh: undefined };
  const madeIn = snapshot.cwd ?? (await writerCwd(log, job.session, snapshot.seq));
  if (madeIn !== undefined && !sameCwd(madeIn, job.cwd)) {
    return {
      resume: undefined,
      snapshot: undefined,
      fresh: { reason: "cwd_changed", previous: snapshot.cliSessionId },
    };
  }
  return { resume: snapshot.cliSessionId, snapshot, fresh: undefined };
}

/**
 * Where the resumed CLI session's running total stands when this run starts, which its results go on
 * from (see costAdded): a kept warm process holds it in memory, as its last result reported it; a
 * process started on the restored file takes it from the file. Undefined when the run resumes no
 * snapshot (a fresh session counts from 0) or, in a log from before snapshots recorded it, the kept
 * process's last total cannot be found.
 */
export async function resumedCostBase(
  log: EventLog,
  session: string,
  plan: ResumePlan,
  keptProcess: boolean,
): Promise<number | undefined> {
  const snapshot = plan.snapshot;
  if (snapshot === undefined || plan.resume !== snapshot.cliSessionId) return undefined;
  if (!keptProcess) return restoredCostTotal(snapshot.bytes, snapshot.cliSessionId);
  return snapshot.costTotalUsd ?? (await reportedTotalBefore(log, session, snapshot.seq, snapshot.cliSessionId));
}

// A run's last result line sits a few events before its snapshot (then cli.exit; stderr may come between).
const RESULT_LOOKBACK = 16;

/**
 * The running total (`total_cost_usd`) CLI session `cliSessionId` reported last before the event at
 * `seq`: for a snapshot from before snapshots recorded it. Undefined when no such result is near.
 */
export async function reportedTotalBefore(
  log: EventLog,
  session: string,
  seq: number,
  cliSessionId: string,
): Promise<number | undefined> {
  let total: number | undefined;
  for (const raw of await cliLinesBetween(log, session, seq - RESULT_LOOKBACK, seq)) {
    const line = parseLine(raw);
    if (line === undefined || !isKnown(line, "result") || stringField(line.line, "session_id") !== cliSessionId)
      continue;
    total = numberField(line.line, "total_cost_usd") ?? total;
  }
  return total;
}

/**
 * The session's conversation so far as text, for a fresh CLI session that has to carry it (a restore):
 * each finished turn's prompt and the rendering of its accepted attempt's lines.
 */
export async function rebuildTranscript(
  log: EventLog,
  session: string,
  beforeTurn: string,
): Promise<{ text: string; turns: number }> {
  const finished = await finishedTurns(log, session, beforeTurn);
  const parts = finished.flatMap((turn) => [`User: ${turn.prompt}`, renderText(turn.lines)]);
  return { text: parts.join("\n\n"), turns: finished.length };
}
