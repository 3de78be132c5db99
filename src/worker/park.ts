// Parked turns, the worker's side. A supervised call nobody answered within the answer window was
// deferred by the hub, so the CLI ended its run: the attempt records the session file and
// `turn.parked`, marks the request parked in the pending index, and its job lets go of everything
// (slot, lease, job lock) until the request's deadline. A decision wakes the job early (parked-waker.ts);
// the job then resumes the turn only once the request is answered, and its CLI, resumed with an empty
// stdin, is asked about the deferred call again and gets the recorded answer from the hub.
import { costAdded, dataOf, type TurnParkedData } from "../events/index.ts";
import {
  getPending,
  inputDigestOf,
  putPending,
  pendingEntryOf,
  type DeferredCall,
  type ParkedCall,
  type PendingEntry,
} from "../decisions/index.ts";
import { latestParked, type SessionStat } from "../log/index.ts";
import type { TurnOutcome } from "../runner/index.ts";
import type { TurnJob } from "../queue/index.ts";
import type { ParkedTurn, PreparedAttempt } from "./attempt-context.ts";
import { writeSnapshot } from "./session-snapshot.ts";
import type { AttemptEnd, ExecuteDeps } from "./types.ts";

/** The turn's latest parking, when it parked at all (the session's meta names the turn that parked last). */
export async function parkedTurnOf(
  deps: ExecuteDeps,
  stat: SessionStat,
  turn: string,
): Promise<ParkedTurn | undefined> {
  if (stat.parkedTurn !== turn) return undefined;
  const found = await latestParked(deps.log, stat.session, turn);
  if (found === undefined) return undefined;
  const { data } = found;
  const call: ParkedCall = {
    requestId: data.requestId,
    requestSeq: data.requestSeq,
    tool: data.tool,
    toolUseId: data.toolUseId,
    inputDigest: data.inputDigest,
    deadline: data.deadline,
  };
  return { call, parks: data.parks, costUsd: data.costUsd ?? 0, seq: found.seq };
}

/** The deadline a parked request of this job gets: the job's, capped at the worker's maximum. */
export function deadlineMsOf(job: TurnJob, deps: ExecuteDeps): number {
  const { deadlineMs, maxDeadlineMs } = deps.settings.parking;
  return Math.min(job.options.decisionDeadlineMs ?? deadlineMs, maxDeadlineMs);
}

/**
 * Whether the run's CLI ended on the call its hook deferred: the result line says `tool_deferred` and
 * names that call (its id, and its input by digest). Undefined: it did not defer; a string: it
 * deferred something the hub did not, which must not park.
 */
export function deferredCallOf(attempt: PreparedAttempt, outcome: TurnOutcome): DeferredCall | string | undefined {
  const deferred = attempt.run.supervised?.deferred();
  if (outcome.result["terminal_reason"] !== "tool_deferred") return undefined;
  const use = outcome.result["deferred_tool_use"] as { id?: unknown; input?: unknown } | undefined;
  if (deferred === undefined) return "the CLI deferred a tool call that the decision hub did not defer";
  const input = use?.input;
  if (
    use?.id !== deferred.call.toolUseId ||
    input === null ||
    typeof input !== "object" ||
    inputDigestOf(input as Record<string, unknown>) !== deferred.call.inputDigest
  )
    return "the call the CLI deferred is not the one the decision hub deferred";
  return deferred;
}

/**
 * Parks the turn on the deferred call: the session file as session.snapshot, then turn.parked (the
 * call, its deadline, what the run cost), then the request's pending entry, marked parked.
 */
export async function parkTurn(
  attempt: PreparedAttempt,
  outcome: TurnOutcome,
  deferred: DeferredCall,
): Promise<AttemptEnd> {
  const { worker, job, events, run } = attempt;
  const total = outcome.result["total_cost_usd"];
  const costTotalUsd = typeof total === "number" && total >= 0 ? total : undefined;
  const written = await writeSnapshot(attempt, outcome, costTotalUsd);
  if (written === undefined || outcome.sessionId === undefined)
    return events.fail("cli_error", "ParkFailed", "the CLI deferred a call but left no session file to resume from");
  const earlier = attempt.parked;
  const runCost = costTotalUsd === undefined ? 0 : costAdded(run.costBaseUsd ?? 0, costTotalUsd);
  const parked: TurnParkedData = {
    attempt: events.attempt,
    ...deferred.call,
    cliSessionId: outcome.sessionId,
    parks: (earlier?.parks ?? 0) + 1,
    queue: worker.settings.queueName,
    costUsd: (earlier?.costUsd ?? 0) + runCost,
  };
  await events.write("turn.parked", parked);
  await events.close();
  worker.snapshots?.set(job.session, events.epoch, written.at, written.snapshot);
  await markParked(worker, attempt, deferred);
  return { kind: "parked", attempt: events.attempt, epoch: events.epoch, call: deferred.call };
}

/** The request's pending entry, marked parked at this attempt's epoch and the log's head. */
async function markParked(worker: ExecuteDeps, attempt: PreparedAttempt, deferred: DeferredCall): Promise<void> {
  const { job, events } = attempt;
  const { lastSeq } = await worker.log.stat(job.session);
  const entry = deferred.entry ?? (await storedOrRecordedEntry(worker, job.session, deferred.call));
  if (entry === undefined) return;
  await putPending(worker.log.redis, worker.log.prefix, {
    ...entry,
    attempt: events.attempt,
    epoch: events.epoch,
    parked: { queue: worker.settings.queueName, seq: lastSeq, at: new Date().toISOString() },
  });
}

/**
 * The parked request's entry in the pending index, or, when the index lost it (a failover that
 * dropped the write), the entry made again from the request the log recorded.
 */
async function storedOrRecordedEntry(
  deps: ExecuteDeps,
  session: string,
  call: ParkedCall,
): Promise<PendingEntry | undefined> {
  const stored = await getPending(deps.log.redis, deps.log.prefix, session, call.requestId);
  if (stored !== undefined) return stored;
  for await (const ev of deps.log.read(session, { fromSeq: call.requestSeq, toSeq: call.requestSeq })) {
    const requested = dataOf("decision.requested", ev.data);
    if (requested === undefined || requested.requestId !== call.requestId) return undefined;
    const { turn, attempt, epoch, seq, at } = ev;
    return pendingEntryOf(requested, { session, turn, attempt, epoch, seq, requestedAt: at });
  }
  return undefined;
}

/**
 * A woken parked turn whose request is still unanswered goes back to waiting: its entry notes what
 * the worker has looked at (the log's head, now), so the sweep wakes it again only for something new.
 */
export async function reparkEntry(deps: ExecuteDeps, stat: SessionStat, parked: ParkedTurn): Promise<void> {
  const entry = await storedOrRecordedEntry(deps, stat.session, parked.call);
  if (entry === undefined) return;
  const at = new Date().toISOString();
  // Not `decided` any more: whatever marked it so (a decision no trusted key signed) does not count.
  await putPending(deps.log.redis, deps.log.prefix, {
    ...entry,
    epoch: stat.epoch,
    parked: { queue: entry.parked?.queue ?? deps.settings.queueName, seq: stat.lastSeq, at },
  });
}
