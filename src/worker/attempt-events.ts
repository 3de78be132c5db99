// One attempt's events: each is shown to the worker's observers (in log order, before it is
// buffered), then handed to the log writer, which appends under the attempt's fencing epoch. A write
// that finds a newer attempt in charge (FencedError) stops the attempt. The attempt's terminal writes
// (failed, cancelled, abandoned) are here too, so every step ends an attempt the same way.
import {
  ATTEMPT_END_KINDS,
  type AttemptAbandonedData,
  type AttemptObserver,
  type EventKind,
  type FailureKind,
  type ObservedEvent,
  type TraceIds,
  type TurnCancelledData,
  type TurnFailedData,
} from "../events/index.ts";
import {
  createWriter,
  DurabilityError,
  FencedError,
  LogRolledBackError,
  type EventInput,
  type SnapshotRef,
  type Writer,
  type WriteOptions,
} from "../log/index.ts";
import type { ParsedLine } from "../protocol/index.ts";
import type { TurnJob } from "../queue/index.ts";
import { sessionTraceparent, type Scrubber } from "../telemetry/index.ts";
import { retryDelayMs } from "./retry.ts";
import type { AttemptControl, AttemptEnd, ExecuteDeps, RolledBackEnd } from "./types.ts";

// The CLI prints a turn's lines in bursts (a message and its result a few ms apart): waiting this
// long lets a burst share one append, at a cost of at most that much to live followers.
const LINE_LINGER_MS = 20;

// A stopped attempt records itself abandoned on the way out, but does not wait long for Redis.
const STOP_CLOSE_MS = 2000;

export interface WriteEventOptions {
  /** The protocol's parse of a `cli.line`'s raw text, for observers. */
  parsed?: ParsedLine | undefined;
  /** The event's time (default now). */
  at?: string | undefined;
  /** How the log writer may batch it (linger, hold). */
  wait?: WriteOptions | undefined;
}

export class AttemptEvents {
  readonly attempt: number;
  readonly epoch: number;
  /** The log's last seq when the attempt began. */
  readonly startSeq: number;
  /** The session's latest snapshot as the attempt's begin read it (null: none; undefined: unknown). */
  readonly lastSnapshot: SnapshotRef | null | undefined;
  /** ISO time of attempt.started (and the start of its span). */
  readonly startedAt = new Date().toISOString();
  /** The first observer's span ids, for attempt.started's `trace`. */
  readonly trace: TraceIds | undefined;
  readonly #deps: ExecuteDeps;
  readonly #job: TurnJob;
  readonly #ctl: AttemptControl;
  #writer: Writer;
  readonly #observers: AttemptObserver[] = [];
  #observersEnded = false;
  /** The worker's scrubber until the run's env is resolved, then the run's (with the overlay's secrets). */
  #scrubber: Scrubber;

  constructor(
    deps: ExecuteDeps,
    job: TurnJob,
    ctl: AttemptControl,
    begun: { epoch: number; attempt: number; lastSeq?: number; lastSnapshot?: SnapshotRef | null | undefined },
  ) {
    this.#deps = deps;
    this.#job = job;
    this.#ctl = ctl;
    this.#scrubber = deps.scrubber;
    this.epoch = begun.epoch;
    this.attempt = begun.attempt;
    this.startSeq = begun.lastSeq ?? 0;
    this.lastSnapshot = begun.lastSnapshot;
    this.#writer = this.#newWriter(this.startSeq);
    this.#observers = this.#startObservers();
    this.trace = this.#observers.find((o) => o.trace !== undefined)?.trace;
  }

  /** The attempt's writer, claiming `startSeq` (the last seq it knows is in the log). */
  #newWriter(startSeq: number): Writer {
    return createWriter({
      log: this.#deps.log,
      session: this.#job.session,
      epoch: this.epoch,
      startSeq,
      logger: this.#deps.logger,
      lingerMs: LINE_LINGER_MS,
      // A writer that stops ends the attempt at once, not at its next line (a tool may run for minutes).
      onFailed: (err) => this.#writerStopped(err),
    });
  }

  #startObservers(): AttemptObserver[] {
    const context = {
      session: this.#job.session,
      turn: this.#job.turn,
      attempt: this.attempt,
      epoch: this.epoch,
      traceparent: this.#job.traceparent,
      sessionTraceparent: sessionTraceparent(this.#deps.settings.logPrefix, this.#job.session),
      // A session's log begins with its first turn's turn.queued.
      opensSession: this.#job.queuedSeq === 1 && this.attempt === 1,
      requestModel: this.#job.options.model,
      tenant: this.#job.tenant,
      startedAt: this.startedAt,
      // Late-bound: the run's scrubber exists only once the env is resolved.
      scrub: (text: string, field: string): string => this.#scrubber.scrub(text, { sink: "span", field }),
    };
    const started: AttemptObserver[] = [];
    for (const observer of this.#deps.observers) {
      const attemptObserver = this.#guard(() => observer.attempt(context));
      if (attemptObserver !== undefined) started.push(attemptObserver);
    }
    return started;
  }

  /**
   * Runs the attempt's work inside its span (the first observer that has one), so its log lines carry the span's ids.
   */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const spans = this.#observers.find((o) => o.run !== undefined);
    return spans === undefined ? fn() : spans.run!(fn);
  }

  /** Observers must not break a turn: what one throws is logged (scrubbed by the logger) and the turn goes on. */
  #guard<T>(call: () => T): T | undefined {
    try {
      return call();
    } catch (err) {
      this.#deps.logger.warn({ err: { message: (err as Error).message } }, "event observer threw");
      return undefined;
    }
  }

  /** From here on, texts are scrubbed with the run's scrubber (it knows the overlay's secrets). */
  useScrubber(scrubber: Scrubber): void {
    this.#scrubber = scrubber;
  }

  /** A message for the log or an event, scrubbed with the run's scrubber. */
  scrubMessage(message: string): string {
    return this.#scrubber.scrub(message, { sink: "log" });
  }

  async write(kind: EventKind, data: unknown, options: WriteEventOptions = {}): Promise<void> {
    const { session, turn } = this.#job;
    const at = options.at ?? (kind === "attempt.started" ? this.startedAt : new Date().toISOString());
    const event: EventInput = { turn, attempt: this.attempt, kind, data, at };
    this.#observe({ session, turn, attempt: this.attempt, epoch: this.epoch, kind, at, data }, options.parsed);
    try {
      await this.#writer.write(event, options.wait);
    } catch (err) {
      this.#writerStopped(err);
      throw err;
    }
  }

  #writerStopped(err: unknown): void {
    if (err instanceof FencedError) this.#ctl.reason ??= "fenced";
    else if (err instanceof LogRolledBackError) this.#ctl.reason ??= "log_rolled_back";
    else if (err instanceof DurabilityError) this.#ctl.reason ??= "log_not_durable";
    this.#ctl.ac.abort();
  }

  /**
   * Ends an attempt whose append Redis applied but could not confirm at the durability level (no
   * replica acknowledged it in time, the AOF was not fsynced): a new writer of the same epoch, claiming
   * only what was confirmed, records it abandoned (`log_not_durable`) and the turn is retried later
   * within the attempt limit, then failed as infrastructure (if even that end cannot be confirmed, the
   * job fails with the error's message).
   */
  async notDurable(): Promise<AttemptEnd> {
    const failure = this.#writer.failure;
    this.#writer = this.#newWriter(this.#writer.lastSeq);
    const message = failure?.message ?? "an append was not confirmed at the log's durability level";
    const retry = this.#deps.settings.retry;
    if (this.attempt >= retry.maxAttempts) {
      try {
        return await this.fail("log_not_durable", "DurabilityError", message, false);
      } catch (err) {
        throw failure ?? err;
      }
    }
    const delayMs = retryDelayMs(retry, this.attempt, undefined);
    try {
      await this.abandon("log_not_durable", true, delayMs);
      await this.close();
    } catch (err) {
      // Applied but not confirmed either (or not applied): the next attempt finds this one's record,
      // or records it abandoned as crashed. Only another kind of failure ends the job here.
      if (!(err instanceof DurabilityError)) throw err;
    }
    return { kind: "retry", attempt: this.attempt, delayMs };
  }

  /** How an attempt whose writer found the log rolled back ends (nothing more can be written under it). */
  rolledBack(): RolledBackEnd {
    const failure = this.#writer.failure;
    const lost = failure instanceof LogRolledBackError ? failure : undefined;
    return {
      kind: "rolled_back",
      attempt: this.attempt,
      ackedSeq: lost?.ackedSeq ?? this.#writer.lastSeq,
      lastSeq: lost?.lastSeq ?? 0,
    };
  }

  #observe(event: ObservedEvent, parsed: ParsedLine | undefined): void {
    for (const observer of this.#observers) this.#guard(() => observer.onEvent(event, parsed));
    // An abandonment this attempt records of an earlier one does not end it.
    const own = event.kind !== "attempt.abandoned" || (event.data as AttemptAbandonedData).attempt === this.attempt;
    if (own && ATTEMPT_END_KINDS.has(event.kind as EventKind)) this.#observersEnded = true;
  }

  /** Waits until everything written is appended. */
  async close(): Promise<void> {
    await this.#writer.close();
  }

  /**
   * Tells the observers the attempt ended, unless a terminal event already did (fenced, crashed, a stop whose event
   * could not be written).
   */
  /** The first reason a gateway policy gave for refusing one of the attempt's model calls. */
  policyRefusal: string | undefined;

  refusedByPolicy(code: string): void {
    this.policyRefusal ??= code;
  }

  endObservers(reason: string): void {
    if (this.#observersEnded) return;
    this.#observersEnded = true;
    for (const observer of this.#observers) this.#guard(() => observer.end?.(reason));
  }

  async fail(errorKind: FailureKind, name: string, message: string, retryable = false): Promise<AttemptEnd> {
    const scrubbed = this.scrubMessage(message);
    const failed: TurnFailedData = { attempt: this.attempt, errorKind, error: { name, message: scrubbed }, retryable };
    await this.write("turn.failed", failed);
    await this.close();
    return { kind: "failed", attempt: this.attempt, errorKind, message: scrubbed };
  }

  async abandon(reason: string, retry: boolean, delayMs?: number): Promise<void> {
    const abandoned: AttemptAbandonedData = { reason, attempt: this.attempt, retry };
    if (delayMs !== undefined) abandoned.delayMs = delayMs;
    await this.write("attempt.abandoned", abandoned);
  }

  /** Ends an attempt stopped from outside (ctl.reason): cancelled, or abandoned for another attempt to take over. */
  async stopped(): Promise<AttemptEnd> {
    const reason = this.#ctl.reason!;
    const attempt = this.attempt;
    if (reason === "log_rolled_back") return this.rolledBack();
    if (reason === "log_not_durable") return this.notDurable();
    if (reason === "cancelled") {
      await this.abandon("cancelled", false);
      const cancelled: TurnCancelledData = { reason: "cancelled while running", by: "producer", attempt };
      await this.write("turn.cancelled", cancelled);
      await this.close();
      return { kind: "cancelled", attempt };
    }
    if (reason !== "fenced") {
      // Best effort: if another attempt has begun meanwhile this is fenced, and that one records us.
      try {
        await this.abandon(reason, true);
        await Promise.race([this.close(), new Promise((r) => setTimeout(r, STOP_CLOSE_MS).unref())]);
      } catch {
        // fenced: the newer attempt owns the log now
      }
    }
    return { kind: "stopped", attempt, reason };
  }
}
