// One job = one turn. Take the session lease (only the session's head turn may; a turn behind it
// waits, a head whose job is gone is repaired), then run attempts while a lease keeper renews the
// lease: a lost session may be restored once in the same job, a retryable failure hands the job back
// delayed, and the turn's end pops it from the session's list and wakes the next turn's job.
import { randomUUID } from "node:crypto";
import { DelayedError, Job, UnrecoverableError } from "bullmq";
import { backoffDelayMs } from "../kernel/index.ts";
import type { AttemptAbandonedData, TurnCancelledData, TurnFailedData } from "../events/index.ts";
import { enterTenant, type TenantEntry, type TenantSlot } from "./tenancy.ts";
import {
  danglingAttempts,
  LogRolledBackError,
  SESSION_ID_PATTERN,
  type EventInput,
  type SessionStat,
} from "../log/index.ts";
import type { ParkedCall } from "../decisions/index.ts";
import { parseOrThrow, turnJobSchema, TURN_ID_PATTERN, type TurnJob } from "../queue/index.ts";
import { beginAttempt, runAttempt } from "./attempt.ts";
import type { CliSlot } from "./cli-slots.ts";
import { LeaseKeeper } from "./lease-keeper.ts";
import type { ParkedTurn } from "./attempt-context.ts";
import { parkedTurnOf, reparkEntry } from "./park.ts";
import type {
  AttemptControl,
  AttemptEnd,
  ExecuteDeps,
  Restore,
  RolledBackEnd,
  StopReason,
  TurnJobResult,
} from "./types.ts";

function waitBackoffMs(job: Job): number {
  const attempts = Math.max(1, job.attemptsStarted ?? 1);
  return backoffDelayMs(attempts + 1, { baseMs: 50, maxMs: 2000 });
}

function notHeadDelayMs(job: Job): number {
  const attempts = Math.max(1, job.attemptsStarted ?? 1);
  return backoffDelayMs(attempts, { baseMs: 1000, maxMs: 30_000 });
}

async function delayJob(job: Job, token: string | undefined, ms: number): Promise<never> {
  await job.moveToDelayed(Date.now() + ms, token);
  throw new DelayedError();
}

// A job handed back for the session's warm owner waits this long: about what the owner needs to
// take it from the queue, short against the hand-off window so the owner gets several chances.
const HANDBACK_DELAY_MS = 150;

/**
 * Warm sessions: another worker kept the session's CLI process and its hand-off window (a few
 * seconds after its turn) still runs, so this worker hands the job back for the owner to take rather
 * than start a second process. A delayed job spends no attempt; once the window ends anyone runs it.
 */
async function warmElsewhere(deps: ExecuteDeps, session: string, data: TurnJob): Promise<boolean> {
  if (!deps.warm.wants(data)) return false;
  const owner = await deps.order.warmOwner(session).catch(() => undefined);
  return owner !== undefined && owner !== deps.settings.workerId;
}

/** Entry point for one BullMQ job (the worker's processor). */
export async function executeTurnJob(
  deps: ExecuteDeps,
  job: Job,
  token: string | undefined,
  signal?: AbortSignal,
  slot?: CliSlot,
): Promise<TurnJobResult> {
  let data: TurnJob;
  try {
    data = parseOrThrow(turnJobSchema, job.data);
  } catch (err) {
    await rejectMalformed(deps, job, err as Error);
    throw new UnrecoverableError(`bad turn job: ${(err as Error).message}`);
  }
  const { session, turn } = data;
  const { order } = deps;
  if (await warmElsewhere(deps, session, data)) return delayJob(job, token, HANDBACK_DELAY_MS);
  const leaseToken = `${deps.settings.workerId}.${randomUUID()}`;

  // One step reads the cancel flag and tries the lease (a cancelled head turn takes it to end itself).
  const acq = await order.acquire(session, turn, leaseToken, deps.settings.leaseMs);
  if (acq.cancelled) {
    if (acq.status === "gone") return { outcome: "skipped" };
    if (acq.status === "ok" || acq.status === "wait") {
      const cancelled: TurnCancelledData = { reason: "cancelled before it ran", by: "producer" };
      // The job carries the seq of its turn.queued: a log below it lost the turn's own record.
      const res = await deps.log.appendUnfenced(
        session,
        [{ turn, attempt: 0, kind: "turn.cancelled", data: cancelled }],
        {
          batchId: `c-${turn}:1`,
          ackedSeq: data.queuedSeq,
        },
      );
      if (res.outcome === "rolled_back") throw new LogRolledBackError(session, data.queuedSeq, res.lastSeq);
      await order.wake(
        acq.status === "ok" ? await order.finish(session, turn, leaseToken) : await order.drop(session, turn),
      );
      return { outcome: "cancelled" };
    }
    return delayJob(job, token, waitBackoffMs(job));
  }

  if (acq.status === "gone") return { outcome: "skipped" };
  if (acq.status === "wait") {
    await repairHead(deps, session, acq.head).catch((err: unknown) =>
      deps.logger.warn(
        { session, err: { message: (err as Error).message } },
        "could not check the session's head turn",
      ),
    );
    // Not our turn yet: the worker that ends the head promotes us, so this delay is only the safety net
    // for a promotion lost to a crash. Short delays would have waiting turns bounce through the
    // worker's slots and crowd out the ones that can run.
    await job.moveToDelayed(Date.now() + notHeadDelayMs(job), token);
    // The head may have finished between our check and the move: then nobody would wake us.
    if ((await order.head(session)) === turn) await order.promote(turn);
    throw new DelayedError();
  }
  if (acq.status === "busy") return delayJob(job, token, Math.max(waitBackoffMs(job), 250));

  const leased: LeasedJob = { job, token, data, leaseToken };
  const stat = await deps.log.stat(session);
  const parked = await parkedTurnOf(deps, stat, turn);
  const answered = (): Promise<boolean> => parkedAnswered(deps, data, stat, parked!.call);
  if (parked !== undefined && stat.state === "parked" && !(await answered())) {
    // Woken before its request was answered (a stray wake-up, or a rule that does not decide it): it
    // goes back to waiting, holding nothing, until its deadline or the next wake-up.
    await reparkEntry(deps, stat, parked);
    return letGoUntil(deps, leased, parked.call, answered);
  }
  const entry = await enterTenant(deps.tenants, deps.settings, data, leaseToken);
  if (entry.kind === "fail") return failForTenant(deps, leased, entry.failed);
  if (entry.kind === "wait") return waitForTenant(deps, leased, entry);
  return runLeased(deps, { ...leased, data: entry.job }, signal, slot, parked, entry.slot);
}

/** The tenant's limits end the turn before it runs: recorded failed, popped, and the next turn woken. */
async function failForTenant(
  deps: ExecuteDeps,
  leased: LeasedJob,
  failed: Omit<TurnFailedData, "attempt">,
): Promise<never> {
  const { session, turn } = leased.data;
  const { epoch, attempt } = await deps.log.beginAttempt(session, turn);
  await deps.log.append(session, epoch, [{ turn, attempt, kind: "turn.failed", data: { ...failed, attempt } }]);
  await deps.order.wake(await deps.order.finish(session, turn, leased.leaseToken));
  deps.logger.warn({ session, turn, errorKind: failed.errorKind }, failed.error.message);
  throw new UnrecoverableError(`turn failed (${failed.errorKind}): ${failed.error.message}`);
}

/**
 * The tenant is at its running limit or over budget: the job lets go of the session lease and waits.
 * At the limit it is noted as blocked, for the next slot released to wake; a slot freed while it was
 * being noted wakes it at once.
 */
async function waitForTenant(
  deps: ExecuteDeps,
  leased: LeasedJob,
  entry: Extract<TenantEntry, { kind: "wait" }>,
): Promise<never> {
  const { session, turn, tenant } = leased.data;
  deps.logger.info({ session, turn, tenant }, entry.why);
  await deps.order.release(session, leased.leaseToken);
  const jobId = String(leased.job.id);
  const delayMs = entry.blocked ? notHeadDelayMs(leased.job) : Math.max(0, entry.untilMs - Date.now());
  await leased.job.moveToDelayed(Date.now() + delayMs, leased.token);
  if (entry.blocked && tenant !== undefined) {
    await deps.tenants.ledger.block(tenant, jobId);
    const limits = await deps.tenants.limits.limitsOf(tenant);
    const max = limits.ok ? limits.limits.maxRunning : undefined;
    if (max !== undefined && (await deps.tenants.ledger.running(tenant)) < max) await deps.order.promote(jobId);
  }
  throw new DelayedError();
}

/** Whether a parked turn's request is answered (a verified decision, a trust rule, or its deadline). */
async function parkedAnswered(
  deps: ExecuteDeps,
  job: TurnJob,
  at: Pick<SessionStat, "attempt" | "epoch">,
  call: ParkedCall,
): Promise<boolean> {
  if (deps.decisionHub === undefined) return true;
  const hub = await deps.decisionHub();
  const run = { session: job.session, turn: job.turn, attempt: at.attempt, epoch: at.epoch, cwd: job.cwd };
  return hub.parkedAnswered(run, call);
}

/**
 * A parked turn's job lets go of the session's lease and its own lock until the call's deadline, or a
 * wake-up. A decision or a cancel that came while it was letting go found no parked job to wake: once
 * delayed, it checks for them itself and wakes at once. It says it parked only once nothing is held.
 */
async function letGoUntil(
  deps: ExecuteDeps,
  leased: LeasedJob,
  call: ParkedCall,
  answered: () => Promise<boolean>,
): Promise<never> {
  const { session, turn } = leased.data;
  await deps.order.release(session, leased.leaseToken);
  await leased.job.moveToDelayed(Math.max(Date.now(), Date.parse(call.deadline)), leased.token);
  deps.logger.info(
    { session, turn, requestId: call.requestId, deadline: call.deadline },
    "turn parked: waiting for an operator's decision with nothing held",
  );
  const wake = (await deps.order.cancelRequested(session, turn)) || (await answered().catch(() => false));
  if (wake) await deps.order.promote(turn);
  throw new DelayedError();
}

/** A malformed job fails once; when it names a valid session/turn it is taken off the session's list. */
async function rejectMalformed(deps: ExecuteDeps, job: Job, err: Error): Promise<void> {
  const data = (job.data ?? {}) as { session?: unknown; turn?: unknown };
  deps.logger.warn({ jobId: job.id, err: { name: err.name, message: err.message } }, "refusing a malformed turn job");
  if (
    typeof data.session !== "string" ||
    typeof data.turn !== "string" ||
    !SESSION_ID_PATTERN.test(data.session) ||
    !TURN_ID_PATTERN.test(data.turn)
  )
    return;
  const { session, turn } = { session: data.session, turn: data.turn };
  const token = `${deps.settings.workerId}.${randomUUID()}`;
  const acq = await deps.order.acquire(session, turn, token, deps.settings.leaseMs);
  if (acq.status === "gone") return;
  if (acq.status === "ok") {
    const { epoch, attempt } = await deps.log.beginAttempt(session, turn);
    const failed: TurnFailedData = {
      attempt,
      errorKind: "bad_payload",
      error: { name: err.name, message: deps.scrubber.scrub(err.message, { sink: "log" }) },
      retryable: false,
    };
    await deps.log.append(session, epoch, [{ turn, attempt, kind: "turn.failed", data: failed }]);
    await deps.order.wake(await deps.order.finish(session, turn, token));
    return;
  }
  if (acq.status === "wait") await deps.order.drop(session, turn);
}

/**
 * The session's head turn blocks everyone behind it. If its job already ended (completed/failed but
 * the worker died before popping it) or vanished long ago (producer died mid-enqueue), take it over:
 * record it failed unless it already ended in the log, pop it, and wake the next turn.
 */
async function repairHead(deps: ExecuteDeps, session: string, head: string): Promise<void> {
  const { order } = deps;
  const job = await Job.fromId(order.queue, head);
  let stuck = false;
  let why = "";
  if (job === undefined) {
    const at = await order.registeredAt(session, head);
    stuck = at === undefined || Date.now() - at > deps.settings.orphanMs;
    why = "its job record is gone";
  } else {
    const state = await job.getState();
    stuck = state === "completed" || state === "failed";
    why = `its job is ${state}`;
  }
  if (!stuck) return;
  const token = `${deps.settings.workerId}.${randomUUID()}`;
  const acq = await order.acquire(session, head, token, deps.settings.leaseMs);
  if (acq.status !== "ok") return;
  try {
    const st = await deps.log.stat(session);
    const ended = st.turn === head && (st.state === "finished" || st.state === "failed" || st.state === "cancelled");
    if (!ended) {
      const { epoch, attempt } = await deps.log.beginAttempt(session, head);
      const events: EventInput[] = [];
      for (const dangling of await danglingAttempts(deps.log, session, head, attempt)) {
        const ab: AttemptAbandonedData = {
          reason: "worker_crashed",
          attempt: dangling,
          retry: false,
          detectedBy: attempt,
        };
        events.push({ turn: head, attempt, kind: "attempt.abandoned", data: ab });
      }
      const failed: TurnFailedData = {
        attempt,
        errorKind: "abandoned",
        error: { name: "AbandonedTurn", message: `the turn can no longer run: ${why}` },
        retryable: false,
      };
      events.push({ turn: head, attempt, kind: "turn.failed", data: failed });
      await deps.log.append(session, epoch, events);
    }
    deps.logger.warn({ session, turn: head, why }, "removed a stuck head turn");
  } finally {
    await order.wake(await order.finish(session, head, token));
  }
}

interface LeasedJob {
  job: Job;
  token: string | undefined;
  data: TurnJob;
  leaseToken: string;
}

async function runLeased(
  deps: ExecuteDeps,
  leased: LeasedJob,
  lockSignal: AbortSignal | undefined,
  slot: CliSlot | undefined,
  parked: ParkedTurn | undefined,
  tenantSlot?: TenantSlot,
): Promise<TurnJobResult> {
  const { session, turn } = leased.data;
  const ctl: AttemptControl = {
    reason: undefined,
    ac: new AbortController(),
    slot,
    budgetCappedByTenant: tenantSlot?.budgetCapped === true,
  };
  const stop = (reason: StopReason): void => {
    if (ctl.reason !== undefined) return;
    ctl.reason = reason;
    deps.logger.warn({ session, turn, reason }, "ending the running turn");
    ctl.ac.abort();
  };
  const onLock = (): void => stop("lock_lost");
  lockSignal?.addEventListener("abort", onLock, { once: true });
  const jobId = String(leased.job.id);
  deps.running.set(jobId, { session, turn, stop });
  const lease = new LeaseKeeper({
    order: deps.order,
    session,
    turn,
    token: leased.leaseToken,
    leaseMs: deps.settings.leaseMs,
    stop,
    alsoRenew: tenantSlot === undefined ? undefined : () => tenantSlot.renew(deps.settings.leaseMs),
  });
  try {
    let restore: Restore | undefined;
    let rolledBack: RolledBackEnd | undefined;
    for (;;) {
      const attempt = await beginAttempt(deps, { job: leased.data, control: ctl, restore, rolledBack, parked });
      const end = await runAttempt(attempt);
      rolledBack = undefined;
      if (end.kind === "restore") restore = { previous: end.previous };
      else if (end.kind === "rolled_back") rolledBack = afterRollback(ctl, end);
      else {
        // The job gives the lease back (or pops its turn) itself from here on.
        lease.stop();
        return await endJob(deps, leased, end);
      }
    }
  } finally {
    lease.stop();
    lockSignal?.removeEventListener("abort", onLock);
    deps.running.delete(jobId);
    await releaseTenantSlot(deps, tenantSlot);
  }
}

/** Gives the tenant's slot back and wakes a turn of the tenant that waited for one. */
async function releaseTenantSlot(deps: ExecuteDeps, slot: TenantSlot | undefined): Promise<void> {
  if (slot === undefined) return;
  try {
    const waiting = await slot.release();
    if (waiting !== undefined) await deps.order.promote(waiting);
  } catch (err) {
    // The slot lapses with the lease; the waiting turn wakes on its own delay.
    deps.logger.warn(
      { tenant: slot.tenant, err: { message: (err as Error).message } },
      "could not give a tenant's slot back",
    );
  }
}

/**
 * The log lost writes the attempt had been acknowledged: the next attempt (bounded by the attempt
 * limit) records it and runs the turn again, with the control reset unless something else stopped it.
 */
function afterRollback(ctl: AttemptControl, end: RolledBackEnd): RolledBackEnd {
  if (ctl.reason === "log_rolled_back") {
    ctl.reason = undefined;
    ctl.ac = new AbortController();
  }
  return end;
}

/** What the job does once an attempt has ended the turn, or handed it on. */
async function endJob(
  deps: ExecuteDeps,
  leased: LeasedJob,
  end: Exclude<AttemptEnd, { kind: "restore" | "rolled_back" }>,
): Promise<TurnJobResult> {
  const { order, settings } = deps;
  const { session, turn } = leased.data;
  switch (end.kind) {
    case "finished":
    case "cancelled":
    case "failed": {
      await order.wake(await order.finish(session, turn, leased.leaseToken));
      if (end.kind === "failed") throw new UnrecoverableError(`turn failed (${end.errorKind}): ${end.message}`);
      if (end.kind === "cancelled") return { outcome: "cancelled", attempt: end.attempt };
      const result: TurnJobResult = { outcome: "finished", attempt: end.attempt };
      if (end.cliSessionId) result.cliSessionId = end.cliSessionId;
      return result;
    }
    case "retry":
      await order.release(session, leased.leaseToken);
      return delayJob(leased.job, leased.token, end.delayMs);
    case "parked":
      // The attempt says what it parked on: nothing to read back from the log it just wrote.
      return letGoUntil(deps, leased, end.call, () => parkedAnswered(deps, leased.data, end, end.call));
    case "stopped":
      if (end.reason === "shutdown" || end.reason === "lease_lost") {
        await order.release(session, leased.leaseToken).catch(() => undefined);
        return delayJob(leased.job, leased.token, end.reason === "shutdown" ? 0 : settings.leaseMs);
      }
      throw new Error(`attempt ${end.attempt} of turn ${turn} ended: ${end.reason}; another attempt owns the turn`);
  }
}
