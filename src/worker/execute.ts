// One job = one turn: take the session lease (only the session's head turn may), then run attempts:
// beginAttempt (new fencing epoch) → record earlier attempts that never ended as abandoned →
// attempt.started → restore the CLI session file from the latest snapshot → runTurn, every stdout
// line appended as it arrives (through the log writer: ordered, batched, backpressure) with stderr
// and the exit → a new snapshot → turn.finished / turn.failed → pop the turn, release the lease and
// wake the next turn's job.
import { randomUUID } from "node:crypto";
import { DelayedError, Job, UnrecoverableError } from "bullmq";
import { runTurn, type TurnHandle, type TurnOutcome } from "../cli/index.ts";
import { prepareSupervisedRun, type DecisionHub, type SupervisedRun } from "../decisions/index.ts";
import { createWriter, FencedError, type EventInput, type EventLog, type Logger, type Writer, type WriteOptions } from "../log/index.ts";
import { isKnown, retryHints, type ParsedLine } from "../protocol/index.ts";
import { firstRefusedEnvName, parseOrThrow, turnJobSchema, TURN_ID_PATTERN, type SessionOrder, type TurnJob } from "../queue/index.ts";
import type {
  AttemptAbandonedData,
  AttemptStartedData,
  CliExitData,
  SessionReplayedData,
  SessionSnapshotData,
  TurnCancelledData,
  TurnFailedData,
  TurnFinishedData,
} from "../events/index.ts";
import { SESSION_ID_PATTERN } from "../log/index.ts";
import type { Tracer } from "@opentelemetry/api";
import { createAttemptSpans, type AttemptSpans, type Scrubber, type TraceIds } from "../telemetry/index.ts";
import { danglingAttempts, lastCliSessionId, latestSnapshot, rebuildTranscript } from "./log-scan.ts";
import type { CliSlot } from "./cli-slots.ts";
import { snapshotRecord, type Snapshot, type SnapshotCache } from "./snapshots.ts";
import { RETRYABLE_KINDS, retryDelayMs, type RetryPolicy } from "./retry.ts";
import { underRoots, WorkspaceNotAllowedError } from "./workspace.ts";

/** Whether a job may ask for its workspace's settings, hooks and MCP servers to load. */
export type WorkspaceTrust = "never" | "job";

export type StopReason = "lease_lost" | "cancelled" | "fenced" | "lock_lost" | "shutdown";

export interface EventObserver {
  /** Called for every event the worker appends, before it is buffered (a hook for spans/metrics). */
  onEvent?(session: string, event: EventInput, info: { epoch: number; traceparent: string | undefined }): void;
}

export interface ExecuteSettings {
  workerId: string;
  workspaceRoots: readonly string[];
  leaseMs: number;
  instanceId: string;
  instanceRoot: string | undefined;
  sandboxed: boolean;
  claudeBin: string | undefined;
  killGraceMs: number;
  /** Env laid over every run (under the job's own overlay). */
  runEnv: Record<string, string>;
  /** Where `{ fromEnv }` references are resolved. */
  secretEnv: Readonly<Record<string, string | undefined>>;
  /** Env names a job may set although refused by default (see ALLOWABLE_ENV_NAMES). */
  allowEnv: ReadonlySet<string>;
  workspaceTrust: WorkspaceTrust;
  mcpConfigFile: string | undefined;
  retry: RetryPolicy;
  /** A head turn whose job vanished is dropped after this long (its producer died mid-enqueue). */
  orphanMs: number;
  /** A run that prints more lines than this (stdout and stderr together) is ended; its turn fails `output_limit`. */
  maxOutputLines: number;
  /** Likewise for bytes of output. */
  maxOutputBytes: number;
}

export interface ExecuteDeps {
  log: EventLog;
  order: SessionOrder;
  settings: ExecuteSettings;
  logger: Logger;
  scrubber: Scrubber;
  /**
   * For raw `cli.line` text: the same secret values as `scrubber` and the built-in patterns, which
   * keep a JSON line valid; none of a caller's hook or extra patterns, which might not.
   */
  lineScrubber: Scrubber;
  /** Keep `cli.line` raw text, `turn.finished.resultText` and session snapshots exactly as the CLI wrote them. */
  keepRawLines?: boolean;
  /** When set, every attempt gets spans (createAttemptSpans), fed each appended event in log order. */
  tracer?: Tracer;
  observer: EventObserver;
  /** Jobs this worker is running, by job id: for lock loss and shutdown. */
  running: Map<string, RunningTurn>;
  /** The worker's loopback decision hub, for supervised turns (started on first use). */
  decisionHub?: () => Promise<DecisionHub>;
  /** Session files of recent snapshots, so a session's next turn here need not rebuild its file from the log. */
  snapshots?: SnapshotCache;
}

export interface RunningTurn {
  readonly session: string;
  readonly turn: string;
  stop(reason: StopReason): void;
}

export interface TurnJobResult {
  outcome: "finished" | "cancelled" | "skipped";
  attempt?: number;
  cliSessionId?: string;
}

interface AttemptControl {
  reason: StopReason | undefined;
  ac: AbortController;
  /** The worker's CLI slots as this job sees them: every CLI start takes one. */
  slot: CliSlot | undefined;
}

type AttemptEnd =
  | { kind: "finished"; attempt: number; cliSessionId: string | undefined }
  | { kind: "failed"; attempt: number; errorKind: string; message: string }
  | { kind: "cancelled"; attempt: number }
  | { kind: "retry"; attempt: number; delayMs: number }
  | { kind: "replay"; attempt: number; previous: string | undefined }
  | { kind: "stopped"; attempt: number; reason: StopReason };

// The CLI prints a turn's lines in bursts (a message and its result 9-16 ms apart, measured on
// 2.1.332 under load): waiting this long lets a burst share one append, at a cost of at most that
// much to live followers.
const LINE_LINGER_MS = 20;
// attempt.started waits this long at most for the CLI's first line (400-460 ms after the spawn here)
// to share its append: one round trip fewer per turn, and live followers see the attempt start when
// its first output does. A worker that dies meanwhile leaves no attempt.started; the next attempt
// still records it abandoned (danglingAttempts goes by attempt numbers, not by starts).
const ATTEMPT_HOLD_MS = 1500;
// The CLI exits 40-50 ms after its result line (measured on 2.1.332), and the turn's end (exit,
// snapshot, turn.finished) follows at once: the result line waits that long to share their append,
// one round trip fewer per turn; live followers see it at most this much later, the turn's end not at all.
const RESULT_LINGER_MS = 100;

function waitBackoffMs(job: Job): number {
  const n = Math.max(1, job.attemptsStarted ?? 1);
  return Math.min(2000, 50 * 2 ** Math.min(n, 6));
}

function notHeadDelayMs(job: Job): number {
  const n = Math.max(1, job.attemptsStarted ?? 1);
  return Math.min(30_000, 1000 * 2 ** Math.min(n - 1, 5));
}

async function delayJob(job: Job, token: string | undefined, ms: number): Promise<never> {
  await job.moveToDelayed(Date.now() + ms, token);
  throw new DelayedError();
}

function errFields(err: unknown): { kind: string; retryable: boolean; name: string; message: string } {
  const e = err as { kind?: unknown; retryable?: unknown; name?: unknown; message?: unknown };
  const kind = typeof e?.kind === "string" ? e.kind : "cli_error";
  return {
    kind,
    retryable: typeof e?.retryable === "boolean" ? e.retryable && RETRYABLE_KINDS.has(kind) : RETRYABLE_KINDS.has(kind),
    name: typeof e?.name === "string" ? e.name : "Error",
    message: typeof e?.message === "string" ? e.message : String(err),
  };
}

/** `refs` receives each `{ fromEnv }` reference's value: a reference marks it secret, whatever the name. */
function resolveEnv(job: TurnJob, settings: ExecuteSettings, refs?: Map<string, string>): Record<string, string> {
  const { secretEnv } = settings;
  const out: Record<string, string> = {};
  const overlay = job.options.env ?? {};
  // Again here: a job written to Redis directly never met the producer's check.
  const refused = firstRefusedEnvName(Object.keys(overlay), settings.allowEnv);
  if (refused !== undefined) throw Object.assign(new Error(`env ${refused.name} ${refused.why}`), { kind: "bad_payload", retryable: false });
  for (const [name, v] of Object.entries(overlay)) {
    if (typeof v === "string") out[name] = v;
    else {
      const value = secretEnv[v.fromEnv];
      if (value === undefined) {
        throw Object.assign(new Error(`env ${name} references ${v.fromEnv}, which this worker's environment does not set; set it on the worker or drop the reference`), {
          kind: "bad_payload",
          retryable: false,
        });
      }
      out[name] = value;
      refs?.set(v.fromEnv, value);
    }
  }
  return out;
}

/** A scrubber that forwards to whichever one `current` returns at the time of each call. */
function lateScrubber(current: () => Scrubber): Scrubber {
  const s: Scrubber = {
    scrub: (text, context) => current().scrub(text, context),
    scrubDeep: (value, context) => current().scrubDeep(value, context),
    addValue: (name, value) => (current().addValue(name, value), s),
    addValues: (values) => (current().addValues(values), s),
    addEnv: (env) => (current().addEnv(env), s),
    addCredentialFile: (path) => current().addCredentialFile(path),
    child: (overlay, options) => current().child(overlay, options),
    withValues: (values) => current().withValues(values),
    get size() {
      return current().size;
    },
  };
  return s;
}

// Shorter referenced values are left to the name rules: redacting a short word everywhere would
// mangle ordinary text.
const MIN_REF_VALUE = 8;

/** Scrubbers for one run: the worker's, plus the overlay's secrets and its references' values. */
function runScrubbers(deps: ExecuteDeps, env: Record<string, string>, refs: Map<string, string>): { scrubber: Scrubber; lines: Scrubber | undefined } {
  const values: Array<[string, string]> = [];
  for (const [name, value] of refs) if (value.length >= MIN_REF_VALUE) values.push([name, value]);
  // The worker-wide scrubbers learn the references too (bounded: they come from the worker's own
  // env), so its logs and job records are covered after the run has ended.
  for (const [name, value] of values) {
    deps.scrubber.addValue(name, value);
    deps.lineScrubber.addValue(name, value);
  }
  return {
    scrubber: deps.scrubber.child(env, { values }),
    lines: deps.keepRawLines === true ? undefined : deps.lineScrubber.child(env, { values }),
  };
}

interface OutputLimit {
  /** Counts one line of output; false once the run is past a limit (the line is not to be written). */
  take(bytes: number): boolean;
  /** Why the run was ended, once it was. */
  readonly exceeded: string | undefined;
}

const sizeText = (bytes: number): string => (bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`);

/**
 * A run's output against the worker's limits (a job cannot raise them): the first line past either
 * ends the run, so a tool that floods stdout cannot fill Redis through one turn.
 */
function outputLimit(settings: ExecuteSettings, end: () => void): OutputLimit {
  let lines = 0;
  let bytes = 0;
  let exceeded: string | undefined;
  return {
    take(n) {
      if (exceeded !== undefined) return false;
      lines++;
      bytes += n;
      if (lines > settings.maxOutputLines) {
        exceeded = `the CLI printed more than ${settings.maxOutputLines} lines of output; the run was ended. The limit is the worker's TURNSTREAM_MAX_OUTPUT_LINES (option maxOutputLines)`;
      } else if (bytes > settings.maxOutputBytes) {
        exceeded = `the CLI printed more than ${sizeText(settings.maxOutputBytes)} of output; the run was ended. The limit is the worker's TURNSTREAM_MAX_OUTPUT_MB (option maxOutputBytes)`;
      }
      if (exceeded === undefined) return true;
      end();
      return false;
    },
    get exceeded() {
      return exceeded;
    },
  };
}

const lineBytes = (l: ParsedLine): number => (l.category === "truncated" ? l.byteLength : Buffer.byteLength(l.raw));

/**
 * The session file as its snapshot stores it: scrubbed like the lines (it is JSONL holding every tool
 * result of the session, and the patterns keep each line valid), so a resumed session shows the
 * model markers where secrets were. A file with nothing to scrub keeps its exact bytes.
 */
function scrubbedSessionFile(file: Buffer, lines: Scrubber | undefined): Buffer {
  if (lines === undefined) return file;
  const text = file.toString("utf8");
  const out = lines.scrub(text, { sink: "log", field: "session.snapshot" });
  return out === text ? file : Buffer.from(out, "utf8");
}

/** Entry point for one BullMQ job (the worker's processor). */
export async function executeTurnJob(deps: ExecuteDeps, job: Job, token: string | undefined, signal?: AbortSignal, slot?: CliSlot): Promise<TurnJobResult> {
  let data: TurnJob;
  try {
    data = parseOrThrow(turnJobSchema, job.data);
  } catch (err) {
    await rejectMalformed(deps, job, err as Error);
    throw new UnrecoverableError(`bad turn job: ${(err as Error).message}`);
  }
  const { session, turn } = data;
  const { order } = deps;
  const leaseToken = `${deps.settings.workerId}.${randomUUID()}`;

  // One step reads the cancel flag and tries the lease (a cancelled head turn takes it to end itself).
  const acq = await order.acquire(session, turn, leaseToken, deps.settings.leaseMs);
  if (acq.cancelled) {
    if (acq.status === "gone") return { outcome: "skipped" };
    if (acq.status === "ok" || acq.status === "wait") {
      const cancelled: TurnCancelledData = { reason: "cancelled before it ran", by: "producer" };
      await deps.log.appendUnfenced(session, [{ turn, attempt: 0, kind: "turn.cancelled", data: cancelled }], { batchId: `c-${turn}:1` });
      await order.wake(acq.status === "ok" ? await order.finish(session, turn, leaseToken) : await order.drop(session, turn));
      return { outcome: "cancelled" };
    }
    return delayJob(job, token, waitBackoffMs(job));
  }

  if (acq.status === "gone") return { outcome: "skipped" };
  if (acq.status === "wait") {
    await repairHead(deps, session, acq.head).catch((err: unknown) =>
      deps.logger.warn({ session, err: { message: (err as Error).message } }, "could not check the session's head turn"),
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

  return runLeased(deps, job, token, data, leaseToken, signal, slot);
}

/** A malformed job fails once; when it names a valid session/turn it is taken off the session's list. */
async function rejectMalformed(deps: ExecuteDeps, job: Job, err: Error): Promise<void> {
  const d = (job.data ?? {}) as { session?: unknown; turn?: unknown };
  deps.logger.warn({ jobId: job.id, err: { name: err.name, message: err.message } }, "refusing a malformed turn job");
  if (typeof d.session !== "string" || typeof d.turn !== "string" || !SESSION_ID_PATTERN.test(d.session) || !TURN_ID_PATTERN.test(d.turn)) return;
  const { session, turn } = { session: d.session, turn: d.turn };
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
      for (const a of await danglingAttempts(deps.log, session, head, attempt)) {
        const ab: AttemptAbandonedData = { reason: "worker_crashed", attempt: a, retry: false, detectedBy: attempt };
        events.push({ turn: head, attempt, kind: "attempt.abandoned", data: ab });
      }
      const failed: TurnFailedData = { attempt, errorKind: "abandoned", error: { name: "AbandonedTurn", message: `the turn can no longer run: ${why}` }, retryable: false };
      events.push({ turn: head, attempt, kind: "turn.failed", data: failed });
      await deps.log.append(session, epoch, events);
    }
    deps.logger.warn({ session, turn: head, why }, "removed a stuck head turn");
  } finally {
    await order.wake(await order.finish(session, head, token));
  }
}

async function runLeased(
  deps: ExecuteDeps,
  job: Job,
  token: string | undefined,
  data: TurnJob,
  leaseToken: string,
  lockSignal: AbortSignal | undefined,
  slot: CliSlot | undefined,
): Promise<TurnJobResult> {
  const { session, turn } = data;
  const { order, settings, logger } = deps;
  const ctl: AttemptControl = { reason: undefined, ac: new AbortController(), slot };
  const stop = (reason: StopReason): void => {
    if (ctl.reason !== undefined) return;
    ctl.reason = reason;
    logger.warn({ session, turn, reason }, "ending the running turn");
    ctl.ac.abort();
  };
  const onLock = (): void => stop("lock_lost");
  lockSignal?.addEventListener("abort", onLock, { once: true });
  const jobId = String(job.id);
  deps.running.set(jobId, { session, turn, stop });

  let lastRenew = Date.now();
  let renewing = false;
  const renewTimer = setInterval(() => {
    if (renewing) return;
    renewing = true;
    order
      .renew(session, turn, leaseToken, settings.leaseMs)
      .then((r) => {
        if (r === "lost") stop("lease_lost");
        else {
          lastRenew = Date.now();
          if (r === "cancelled") stop("cancelled");
        }
      })
      .catch(() => {
        // Redis unreachable: our lease runs out after leaseMs; past that someone else may hold it.
        if (Date.now() - lastRenew > settings.leaseMs) stop("lease_lost");
      })
      .finally(() => {
        renewing = false;
      });
  }, Math.max(200, Math.floor(settings.leaseMs / 3)));

  try {
    let replay: { previous: string | undefined } | undefined;
    for (;;) {
      const end = await runAttempt(deps, data, ctl, replay);
      switch (end.kind) {
        case "finished":
        case "cancelled":
        case "failed": {
          await order.wake(await order.finish(session, turn, leaseToken));
          if (end.kind === "failed") throw new UnrecoverableError(`turn failed (${end.errorKind}): ${end.message}`);
          if (end.kind === "cancelled") return { outcome: "cancelled", attempt: end.attempt };
          return { outcome: "finished", attempt: end.attempt, ...(end.cliSessionId ? { cliSessionId: end.cliSessionId } : {}) };
        }
        case "replay":
          replay = { previous: end.previous };
          continue;
        case "retry":
          await order.release(session, leaseToken);
          return delayJob(job, token, end.delayMs);
        case "stopped":
          if (end.reason === "shutdown" || end.reason === "lease_lost") {
            await order.release(session, leaseToken).catch(() => undefined);
            return delayJob(job, token, end.reason === "shutdown" ? 0 : settings.leaseMs);
          }
          throw new Error(`attempt ${end.attempt} of turn ${turn} ended: ${end.reason}; another attempt owns the turn`);
      }
    }
  } finally {
    clearInterval(renewTimer);
    lockSignal?.removeEventListener("abort", onLock);
    deps.running.delete(jobId);
  }
}

async function runAttempt(
  deps: ExecuteDeps,
  data: TurnJob,
  ctl: AttemptControl,
  replay: { previous: string | undefined } | undefined,
): Promise<AttemptEnd> {
  const { session, turn } = data;
  const { log, settings, logger } = deps;
  let scrubber = deps.scrubber;
  let lineScrubber: Scrubber | undefined;
  const { epoch, attempt, lastSnapshot } = await log.beginAttempt(session, turn);
  // The begin returns where the latest snapshot is (read in the same step as the epoch bump, so no
  // fenced attempt can add one behind it): mostly the cache has it and nothing more is read.
  const snapshotRead: Promise<Snapshot | undefined> = replay === undefined ? latestSnapshot(log, session, deps.snapshots, lastSnapshot) : Promise.resolve(undefined);
  snapshotRead.catch(() => undefined); // awaited below unless the attempt ends before it needs it
  const traceparent = data.traceparent;
  const writer: Writer = createWriter({ log, session, epoch, logger, lingerMs: LINE_LINGER_MS });
  const startedAt = new Date().toISOString();
  const spans: AttemptSpans | undefined =
    deps.tracer === undefined
      ? undefined
      : createAttemptSpans({
          tracer: deps.tracer,
          // The run's scrubber (with the overlay's secrets) exists only once the env is resolved.
          scrubber: lateScrubber(() => scrubber),
          session,
          turn,
          attempt,
          startTime: startedAt,
          ...(traceparent !== undefined ? { traceparent } : {}),
          ...(data.options.model !== undefined ? { requestModel: data.options.model } : {}),
        });
  const write = async (kind: string, d: unknown, parsed?: ParsedLine, at?: string, wait?: WriteOptions): Promise<void> => {
    const ev: EventInput = { turn, attempt, kind, data: d, at: at ?? (kind === "attempt.started" ? startedAt : new Date().toISOString()) };
    try {
      deps.observer.onEvent?.(session, ev, { epoch, traceparent });
    } catch (err) {
      logger.warn({ err: { message: (err as Error).message } }, "event observer threw");
    }
    // Fed as written, so spans see the log's order; earlier attempts' abandonment is not ours to end on.
    if (spans !== undefined && !(kind === "attempt.abandoned" && (d as AttemptAbandonedData).attempt !== attempt)) {
      try {
        spans.onEnvelope({ ...ev, session }, parsed);
      } catch (err) {
        logger.warn({ err: { message: (err as Error).message } }, "attempt spans failed on an event");
      }
    }
    try {
      await writer.write(ev, wait);
    } catch (err) {
      if (err instanceof FencedError) ctl.reason ??= "fenced";
      ctl.ac.abort();
      throw err;
    }
  };
  const scrubMsg = (m: string): string => scrubber.scrub(m, { sink: "log" });
  const fail = async (errorKind: string, name: string, message: string, retryable = false): Promise<AttemptEnd> => {
    const f: TurnFailedData = { attempt, errorKind, error: { name, message: scrubMsg(message) }, retryable };
    await write("turn.failed", f);
    await writer.close();
    return { kind: "failed", attempt, errorKind, message: scrubMsg(message) };
  };
  const abandon = async (reason: string, retry: boolean, extra: Partial<AttemptAbandonedData> = {}): Promise<void> => {
    const a: AttemptAbandonedData = { reason, attempt, retry, ...extra };
    await write("attempt.abandoned", a);
  };
  const stopped = async (): Promise<AttemptEnd> => {
    const reason = ctl.reason!;
    if (reason === "cancelled") {
      await abandon("cancelled", false);
      const c: TurnCancelledData = { reason: "cancelled while running", by: "producer", attempt };
      await write("turn.cancelled", c);
      await writer.close();
      return { kind: "cancelled", attempt };
    }
    if (reason !== "fenced") {
      // Best effort: if another attempt has begun meanwhile this is fenced, and that one records us.
      try {
        await abandon(reason, true);
        await Promise.race([writer.close(), new Promise((r) => setTimeout(r, 2000).unref())]);
      } catch {
        // fenced: the newer attempt owns the log now
      }
    }
    return { kind: "stopped", attempt, reason };
  };

  try {
    for (const a of await danglingAttempts(log, session, turn, attempt)) {
      await write("attempt.abandoned", { reason: "worker_crashed", attempt: a, retry: true, detectedBy: attempt } satisfies AttemptAbandonedData);
    }
    if (ctl.reason !== undefined) return await stopped();
    if (attempt > settings.retry.maxAttempts) {
      return await fail("too_many_attempts", "TooManyAttempts", `the turn had ${attempt - 1} attempts (limit ${settings.retry.maxAttempts})`);
    }
    if (!underRoots(data.cwd, settings.workspaceRoots)) {
      const e = new WorkspaceNotAllowedError(settings.workspaceRoots);
      return await fail(e.kind, e.name, e.message);
    }
    let env: Record<string, string>;
    const refs = new Map<string, string>();
    try {
      env = resolveEnv(data, settings, refs);
    } catch (err) {
      return await fail("bad_payload", "BadPayload", (err as Error).message);
    }
    ({ scrubber, lines: lineScrubber } = runScrubbers(deps, env, refs));
    const snapshot = await snapshotRead;
    const resume = replay === undefined ? (snapshot?.cliSessionId ?? (await lastCliSessionId(log, session))) : undefined;
    let prompt = data.prompt;
    let replayedTurns = 0;
    if (replay !== undefined) {
      const t = await rebuildTranscript(log, session, turn);
      replayedTurns = t.turns;
      prompt =
        `The earlier part of this conversation could not be restored, so here it is as a transcript:\n\n` +
        `<transcript>\n${t.text}\n</transcript>\n\nContinue from there. The user's new message:\n\n${data.prompt}`;
    }
    const started: AttemptStartedData = { worker: settings.workerId, attempt, cwd: data.cwd };
    if (data.options.model !== undefined) started.model = data.options.model;
    if (resume !== undefined) started.resume = resume;
    if (snapshot !== undefined) started.snapshotSeq = snapshot.seq;
    if (traceparent !== undefined) started.traceparent = traceparent;
    // The attempt's span ids, so a re-export from the log lands on the same spans.
    if (spans !== undefined) (started as AttemptStartedData & { trace?: TraceIds }).trace = spans.traceIds();
    await write("attempt.started", started, undefined, undefined, { holdMs: ATTEMPT_HOLD_MS });
    if (ctl.reason !== undefined) return await stopped();

    const o = data.options;
    if (o.trustWorkspace === true && settings.workspaceTrust !== "job") {
      return await fail("bad_options", "WorkspaceTrustRefused", "the turn asks to trust its workspace, which this worker does not allow; set TURNSTREAM_WORKSPACE_TRUST=job on the worker, or drop trustWorkspace");
    }
    let supervised: SupervisedRun | undefined;
    if (o.supervised === true) {
      if (deps.decisionHub === undefined) return await fail("bad_options", "SupervisedUnavailable", "this worker has no decision hub for supervised turns");
      let hub: DecisionHub;
      try {
        hub = await deps.decisionHub();
      } catch (err) {
        // e.g. no operator keys: no decision could be verified, so the turn must not start.
        return await fail("bad_options", "SupervisedUnavailable", (err as Error).message);
      }
      supervised = prepareSupervisedRun(hub, {
        session,
        turn,
        attempt,
        epoch,
        cwd: data.cwd,
        logger,
        ...(o.riskyTools !== undefined ? { riskyTools: o.riskyTools } : {}),
        ...(o.unsupervisedTools !== undefined ? { unsupervisedTools: o.unsupervisedTools } : {}),
      });
    }
    // Taken only now, so the lease, the begin and attempt.started are done while a CLI that has
    // printed its result is still exiting.
    const release = ctl.slot === undefined ? () => undefined : await ctl.slot.acquire(ctl.ac.signal);
    if (release === undefined) {
      supervised?.close();
      ctl.reason ??= "shutdown";
      return await stopped();
    }
    let handle: TurnHandle;
    try {
      handle = runTurn({
        cwd: data.cwd,
        prompt,
        ...(o.model !== undefined ? { model: o.model } : {}),
        ...(resume !== undefined ? { resume } : {}),
        ...(snapshot !== undefined && resume === snapshot.cliSessionId ? { sessionFile: snapshot.bytes } : {}),
        ...(o.permissionMode !== undefined ? { permissionMode: o.permissionMode } : {}),
        ...(o.skipPermissions !== undefined ? { skipPermissions: o.skipPermissions, sandboxed: settings.sandboxed } : {}),
        ...(o.maxTurns !== undefined ? { maxTurns: o.maxTurns } : {}),
        ...(o.maxBudgetUsd !== undefined ? { maxBudgetUsd: o.maxBudgetUsd } : {}),
        ...(o.appendSystemPrompt !== undefined ? { appendSystemPrompt: o.appendSystemPrompt } : {}),
        ...(o.allowedTools !== undefined ? { allowedTools: supervised === undefined ? o.allowedTools : supervised.allowedToolsFilter(o.allowedTools) } : {}),
        ...(o.disallowedTools !== undefined ? { disallowedTools: o.disallowedTools } : {}),
        ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
        ...(o.inactivityTimeoutMs !== undefined ? { inactivityTimeoutMs: o.inactivityTimeoutMs } : {}),
        ...(o.trustWorkspace === true ? { trustWorkspace: true } : {}),
        ...(settings.mcpConfigFile !== undefined ? { mcpConfigFile: settings.mcpConfigFile } : {}),
        // Last, so nothing above can loosen it: the hook's settings, default mode, no skipping.
        ...(supervised !== undefined ? supervised.turnOptions : {}),
        ...(settings.claudeBin !== undefined ? { claudeBin: settings.claudeBin } : {}),
        env: { ...settings.runEnv, ...env },
        killGraceMs: settings.killGraceMs,
        signal: ctl.ac.signal,
        logger,
        configHome: {
          instanceId: settings.instanceId,
          ...(settings.instanceRoot !== undefined ? { instanceRoot: settings.instanceRoot } : {}),
          runId: `${turn}.${attempt}.${epoch}`,
        },
      });
    } catch (err) {
      release();
      supervised?.close();
      const f = errFields(err);
      return await fail(f.kind, f.name, f.message);
    }
    void handle.exited.then(release);
    if (supervised !== undefined) void handle.outcome.then(supervised.close, supervised.close);
    const hintLines: ParsedLine[] = [];
    const limit = outputLimit(settings, () => handle.kill());
    const pumpOut = (async () => {
      for await (const l of handle.lines) {
        if (ctl.ac.signal.aborted && ctl.reason === "fenced") continue;
        if (!limit.take(lineBytes(l))) continue;
        const result = isKnown(l, "result");
        if (l.type === "system/api_retry" || l.type === "rate_limit_event") hintLines.push(l);
        else if (result) ctl.slot?.ending();
        const d = l.category === "truncated" ? { raw: "", truncated: { byteLength: l.byteLength, sha256: l.sha256 } } : { raw: lineScrubber === undefined ? l.raw : lineScrubber.scrub(l.raw, { sink: "log", field: "cli.line" }) };
        await write("cli.line", d, l, undefined, result ? { lingerMs: RESULT_LINGER_MS } : undefined);
      }
    })();
    const pumpErr = (async () => {
      for await (const s of handle.stderr) {
        if (ctl.ac.signal.aborted && ctl.reason === "fenced") continue;
        if (!limit.take(Buffer.byteLength(s))) continue;
        await write("cli.stderr", { text: scrubMsg(s) });
      }
    })();
    let outcome: TurnOutcome | undefined;
    let failure: unknown;
    try {
      outcome = await handle.outcome;
    } catch (err) {
      failure = err;
    }
    const pumps = await Promise.allSettled([pumpOut, pumpErr]);
    if (ctl.reason === "fenced") return { kind: "stopped", attempt, reason: "fenced" };
    const pumpFailure = pumps.find((p) => p.status === "rejected");
    if (pumpFailure !== undefined && ctl.reason === undefined) throw (pumpFailure as PromiseRejectedResult).reason;
    const ef = failure as { exitCode?: number | null; signal?: string | null } | undefined;
    const exit: CliExitData = {
      code: outcome?.exitCode ?? ef?.exitCode ?? null,
      signal: outcome?.signal ?? ef?.signal ?? null,
      durationMs: outcome?.durationMs ?? 0,
      ...(handle.pid !== undefined ? { pid: handle.pid } : {}),
    };
    await write("cli.exit", exit);

    if (ctl.reason !== undefined) return await stopped();
    // Even when the CLI got its result out before the kill: the log holds only part of the run.
    if (limit.exceeded !== undefined) return await fail("output_limit", "OutputLimitExceeded", limit.exceeded);
    if (outcome !== undefined) {
      const cliSessionId = outcome.sessionId;
      let written: { at: string; snapshot: Snapshot } | undefined;
      if (outcome.sessionFile !== undefined && cliSessionId !== undefined) {
        const file = scrubbedSessionFile(outcome.sessionFile, lineScrubber);
        const rec = snapshotRecord(file, cliSessionId, resume === snapshot?.cliSessionId ? snapshot : undefined);
        const snap: SessionSnapshotData = rec.data;
        const at = new Date().toISOString();
        await write("session.snapshot", snap, undefined, at);
        written = { at, snapshot: { seq: 0, cliSessionId, bytes: file, depth: snap.depth ?? 0, hash: rec.hash } };
      }
      if (replay !== undefined) {
        const r: SessionReplayedData = { by: "worker", reason: "lost_session", turns: replayedTurns };
        if (replay.previous !== undefined) r.previousCliSessionId = replay.previous;
        if (cliSessionId !== undefined) r.cliSessionId = cliSessionId;
        await write("session.replayed", r);
        logger.warn({ session, turn, turns: replayedTurns }, "CLI session was lost; started a fresh one carrying the transcript from the log");
      }
      const fin: TurnFinishedData = { attempt, durationMs: outcome.durationMs };
      if (cliSessionId !== undefined) fin.cliSessionId = cliSessionId;
      const cost = outcome.result["total_cost_usd"];
      if (typeof cost === "number") fin.costUsd = cost;
      // Plain text, not a JSON line: the run's full scrubber, like stderr and error messages.
      if (outcome.resultText !== undefined) fin.resultText = deps.keepRawLines === true ? outcome.resultText : scrubMsg(outcome.resultText);
      await write("turn.finished", fin);
      await writer.close();
      // Appended (close would have thrown otherwise): the next turn of the session may start from it.
      if (written !== undefined) deps.snapshots?.set(session, epoch, written.at, written.snapshot);
      return { kind: "finished", attempt, cliSessionId };
    }

    const f = errFields(failure);
    if (f.kind === "lost_session") {
      const policy = data.onLostSession ?? (await deps.order.onLostSession(session)) ?? "fail";
      if (policy === "replay" && replay === undefined) {
        await abandon("lost_session", true);
        await writer.close();
        return { kind: "replay", attempt, previous: resume };
      }
      const why = snapshot === undefined ? "no session snapshot to restore" : "the restored session file was not accepted";
      return await fail("lost_session", f.name, `${f.message} (${why})`);
    }
    if (f.retryable && attempt < settings.retry.maxAttempts) {
      const delayMs = retryDelayMs(settings.retry, attempt, retryHints(hintLines));
      await abandon(f.kind, true, { delayMs });
      await writer.close();
      return { kind: "retry", attempt, delayMs };
    }
    return await fail(f.kind, f.name, f.message, f.retryable);
  } catch (err) {
    if (err instanceof FencedError || ctl.reason === "fenced") {
      ctl.ac.abort();
      return { kind: "stopped", attempt, reason: "fenced" };
    }
    throw err;
  } finally {
    // No terminal event reached the spans (fenced, crashed, a stop whose event could not be written).
    if (spans !== undefined && !spans.ended) spans.end({ errorKind: ctl.reason ?? "worker_error" });
  }
}
