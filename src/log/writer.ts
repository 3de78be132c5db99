// A buffered writer for one session and one epoch (or unfenced). It batches events, keeps exactly
// one batch in flight (so batch ids stay in order even across reconnects and cluster redirects, which
// is what makes "n not above the last seen n" a sound duplicate test), retries with backoff while
// Redis is unreachable, and applies backpressure: `write` waits while the buffer is full. It never
// drops an event and never appends one twice. A fenced epoch fails the writer with FencedError. Every
// batch claims the last seq the writer was acknowledged (append.lua's rollback check): a log found
// behind it lost confirmed writes, and the writer stops with LogRolledBackError rather than append
// after a hole.
import type { EventInput } from "./envelope.ts";
import { ConflictError, FencedError, LogRolledBackError, UnfencedKindError, WriterClosedError } from "./errors.ts";
import { newWriterId, type EncodedEvent, type EventLog } from "./event-log.ts";
import { explainRedisError, redisAddress } from "./redis-errors.ts";
import { DurabilityError } from "./durability.ts";
import { backoffDelayMs, silentLogger, type Logger } from "../kernel/index.ts";

export interface WriterOptions {
  log: EventLog;
  session: string;
  /** The attempt's epoch from beginAttempt, or null for unfenced kinds (producer, operator). */
  epoch: number | null;
  writerId?: string;
  /**
   * The log's last seq as the writer's owner last saw it (an attempt: beginAttempt's lastSeq); the
   * first batch claims it as acknowledged. Default 0: no claim until the first batch is in.
   */
  startSeq?: number;
  maxBatchEvents?: number;
  maxBatchBytes?: number;
  /** Buffer bound (counting the batch in flight); one event larger than the bound is still accepted alone. */
  maxBufferEvents?: number;
  maxBufferBytes?: number;
  backoff?: { initialMs?: number; maxMs?: number };
  /**
   * How long an idle writer waits after an event before sending, so events that arrive close
   * together (a CLI prints several lines within a few ms) share one append. 0 (default) sends at
   * once; flush() and close() never wait for it, and a full batch goes at once.
   */
  lingerMs?: number;
  logger?: Logger;
  /** Called after each batch is known to be in the log. */
  onAppended?: (info: { firstSeq: number; lastSeq: number; count: number; duplicate: boolean }) => void;
  /**
   * Called once when the writer stops for good (FencedError, LogRolledBackError…), before any write or flush sees it.
   */
  onFailed?: (error: Error) => void;
  /** Called when an append failed and will be retried. */
  onRetry?: (info: { error: unknown; attempt: number; delayMs: number }) => void;
}

export interface WriterStats {
  events: number;
  batches: number;
  retries: number;
  duplicates: number;
}

export interface WriteOptions {
  /**
   * Wait up to this long (instead of `lingerMs`) for more events to share the event's append: for an
   * event that is known to be followed shortly by others. flush() and close() still send at once.
   */
  lingerMs?: number;
  /**
   * Wait up to this long for the next event, whose own linger then decides when the batch goes: for
   * an event that opens a stretch of quiet (a run's start before the CLI's first line). Only for an
   * event that finds nothing else waiting to be sent; otherwise the usual linger applies.
   */
  holdMs?: number;
}

export interface Writer {
  /** Buffers one event; resolves once it is buffered (waits while the buffer is full). */
  write(event: EventInput, options?: WriteOptions): Promise<void>;
  /** Resolves with the last seq once every event written so far is in the log. */
  flush(): Promise<number>;
  /** Flushes, then stops accepting events and drops the writer's dedupe entry. */
  close(): Promise<number>;
  readonly writerId: string;
  readonly lastSeq: number;
  /** Events buffered or in flight. */
  readonly pending: number;
  readonly stats: Readonly<WriterStats>;
  /** The error that stopped the writer (FencedError, LogRolledBackError, ...), if any. */
  readonly failure: Error | undefined;
}

// Everything else (connection loss, LOADING after a restart, CLUSTERDOWN, TRYAGAIN, timeouts) is
// retried: giving up would drop events.
function isFatal(err: unknown): boolean {
  // A DurabilityError already retried its WAIT: the attempt fails as infrastructure, not a forever loop.
  return (
    err instanceof FencedError ||
    err instanceof ConflictError ||
    err instanceof LogRolledBackError ||
    err instanceof DurabilityError
  );
}

/** The writer's options with their defaults applied. */
interface WriterSettings {
  maxBatchEvents: number;
  maxBatchBytes: number;
  maxBufferEvents: number;
  maxBufferBytes: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  lingerMs: number;
  logger: Logger;
  onAppended: WriterOptions["onAppended"];
  onRetry: WriterOptions["onRetry"];
  onFailed: WriterOptions["onFailed"];
}

function writerSettings(options: WriterOptions): WriterSettings {
  return {
    maxBatchEvents: options.maxBatchEvents ?? 512,
    maxBatchBytes: options.maxBatchBytes ?? 1024 * 1024,
    maxBufferEvents: options.maxBufferEvents ?? 8192,
    maxBufferBytes: options.maxBufferBytes ?? 16 * 1024 * 1024,
    backoffInitialMs: options.backoff?.initialMs ?? 50,
    backoffMaxMs: options.backoff?.maxMs ?? 2000,
    lingerMs: options.lingerMs ?? 0,
    logger: options.logger ?? silentLogger,
    onAppended: options.onAppended,
    onRetry: options.onRetry,
    onFailed: options.onFailed,
  };
}

/** Events from the front of the buffer that go in one append. */
interface Batch {
  events: EncodedEvent[];
  bytes: number;
}

/** The events not yet in the log (the batch in flight included), and the writes waiting for room. */
class EventBuffer {
  readonly #events: EncodedEvent[] = [];
  #bytes = 0;
  #roomWaiters: (() => void)[] = [];
  readonly #settings: WriterSettings;

  constructor(settings: WriterSettings) {
    this.#settings = settings;
  }

  get length(): number {
    return this.#events.length;
  }

  /** Enough is buffered to fill a batch, so lingering would gain nothing. */
  get holdsFullBatch(): boolean {
    return this.#events.length >= this.#settings.maxBatchEvents || this.#bytes >= this.#settings.maxBatchBytes;
  }

  /** An empty buffer takes any event, however large; otherwise both bounds hold. */
  hasRoom(bytes: number): boolean {
    const { maxBufferEvents, maxBufferBytes } = this.#settings;
    return (
      this.#events.length === 0 || (this.#events.length < maxBufferEvents && this.#bytes + bytes <= maxBufferBytes)
    );
  }

  waitForRoom(): Promise<void> {
    return new Promise((resolve) => this.#roomWaiters.push(resolve));
  }

  /** Wakes every write waiting for room (each checks again, or sees the writer's failure). */
  wakeWaiters(): void {
    const waiters = this.#roomWaiters;
    this.#roomWaiters = [];
    for (const wake of waiters) wake();
  }

  push(event: EncodedEvent): void {
    this.#events.push(event);
    this.#bytes += event.bytes;
  }

  /** The next batch: as many events from the front as the batch bounds allow, at least one. */
  nextBatch(): Batch {
    const { maxBatchEvents, maxBatchBytes } = this.#settings;
    let count = 0;
    let bytes = 0;
    while (count < this.#events.length && count < maxBatchEvents) {
      const eventBytes = this.#events[count]!.bytes;
      if (count > 0 && bytes + eventBytes > maxBatchBytes) break;
      bytes += eventBytes;
      count++;
    }
    return { events: this.#events.slice(0, count), bytes };
  }

  /** Drops a batch that is now in the log from the front, making room. */
  remove(batch: Batch): void {
    this.#events.splice(0, batch.events.length);
    this.#bytes -= batch.bytes;
    this.wakeWaiters();
  }
}

/**
 * When an idle writer sends: at once, or after a linger so that events arriving close together share
 * one append. The usual linger never slides (a steady trickle still goes every lingerMs); only a
 * longer wait asked for by one event pushes the send back. A hold lasts only until the next event.
 */
class LingerTimer {
  readonly #lingerMs: number;
  readonly #send: () => void;
  #timer: NodeJS.Timeout | undefined;
  /** When the pending timer fires. */
  #due = 0;
  /** The pending timer is a hold: the next event replaces it with its own linger. */
  #holding = false;

  constructor(lingerMs: number, send: () => void) {
    this.#lingerMs = lingerMs;
    this.#send = send;
  }

  /** A new event arrived: a pending hold gives way to the event's own linger. */
  endHold(): void {
    if (this.#holding) this.#clear();
    this.#holding = false;
  }

  sendNow(): void {
    this.#clear();
    queueMicrotask(this.#send);
  }

  sendAfter(waitMs: number, hold: boolean): void {
    const due = Date.now() + waitMs;
    if (this.#timer !== undefined) {
      if (waitMs <= this.#lingerMs || due <= this.#due) return;
      clearTimeout(this.#timer);
    }
    this.#due = due;
    this.#holding = hold;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#send();
    }, waitMs);
  }

  #clear(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/** How soon buffered events should go, as asked by a write or a flush. */
interface SendRequest {
  now: boolean;
  waitMs: number;
  hold: boolean;
}

class BufferedWriter {
  readonly writerId: string;
  readonly #log: EventLog;
  readonly #session: string;
  readonly #epoch: number | null;
  readonly #settings: WriterSettings;
  readonly #buffer: EventBuffer;
  readonly #linger: LingerTimer;
  readonly #stats: WriterStats = { events: 0, batches: 0, retries: 0, duplicates: 0 };
  #batchNo = 0;
  #lastSeq = 0;
  #pumping = false;
  #closed = false;
  #failure: Error | undefined;
  #flushWaiters: { resolve: (seq: number) => void; reject: (err: Error) => void }[] = [];

  constructor(options: WriterOptions) {
    this.#log = options.log;
    this.#session = options.session;
    this.#epoch = options.epoch;
    this.writerId = options.writerId ?? newWriterId();
    this.#lastSeq = options.startSeq ?? 0;
    this.#settings = writerSettings(options);
    this.#buffer = new EventBuffer(this.#settings);
    this.#linger = new LingerTimer(this.#settings.lingerMs, () => void this.#pump());
    options.log.keys(options.session); // validates the session id up front
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  get pending(): number {
    return this.#buffer.length;
  }

  get stats(): WriterStats {
    return { ...this.#stats };
  }

  get failure(): Error | undefined {
    return this.#failure;
  }

  async write(event: EventInput, options?: WriteOptions): Promise<void> {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#closed) throw new WriterClosedError(this.#session);
    const log = this.#log;
    const enc = log.encode(this.#session, this.#epoch ?? 0, event);
    if (this.#epoch === null && !log.unfencedKinds.has(enc.kind))
      throw new UnfencedKindError(enc.kind, [...log.unfencedKinds]);
    while (!this.#buffer.hasRoom(enc.bytes)) {
      await this.#buffer.waitForRoom();
      if (this.#failure !== undefined) throw this.#failure;
    }
    this.#buffer.push(enc);
    const holdMs = options?.holdMs ?? 0;
    if (holdMs > 0 && this.#buffer.length === 1) this.#schedule({ now: false, waitMs: holdMs, hold: true });
    else this.#schedule({ now: false, waitMs: options?.lingerMs ?? this.#settings.lingerMs, hold: false });
  }

  flush(): Promise<number> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#buffer.length === 0) return Promise.resolve(this.#lastSeq);
    return new Promise((resolve, reject) => {
      this.#flushWaiters.push({ resolve, reject });
      this.#schedule({ now: true, waitMs: 0, hold: false });
    });
  }

  async close(): Promise<number> {
    this.#closed = true;
    const seq = await this.flush();
    // Every batch is in, so no re-send can need the dedupe entry any more: dropping it is cleanup,
    // not awaited (the end of a turn waits on no more round trips than it must).
    if (this.#batchNo > 0) {
      this.#log
        .forgetWriter(this.#session, this.writerId)
        .catch((err: unknown) =>
          this.#settings.logger.debug(
            { session: this.#session, writer: this.writerId, err: { message: (err as Error)?.message } },
            "dedupe entry cleanup failed",
          ),
        );
    }
    return seq;
  }

  #schedule(request: SendRequest): void {
    this.#linger.endHold();
    // A running pump sends everything buffered before it stops.
    if (this.#pumping) return;
    if (request.now || request.waitMs <= 0 || this.#buffer.holdsFullBatch) this.#linger.sendNow();
    else this.#linger.sendAfter(request.waitMs, request.hold);
  }

  /** Sends batch after batch until the buffer is empty, one batch in flight at a time. */
  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#buffer.length > 0 && this.#failure === undefined) {
        const batch = this.#buffer.nextBatch();
        try {
          await this.#send(batch.events);
        } catch (err) {
          this.#fail(err instanceof Error ? err : new Error(String(err)));
          return;
        }
        this.#buffer.remove(batch);
        this.#settleFlushes();
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** Appends one batch under its own batch id, retrying with backoff until it is in or fenced. */
  async #send(events: EncodedEvent[]): Promise<void> {
    this.#batchNo++;
    const batchId = `${this.writerId}:${this.#batchNo}`;
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await this.#log.appendEncoded(this.#session, this.#epoch, events, {
          batchId,
          ackedSeq: this.#lastSeq,
        });
        if (res.outcome === "rolled_back") throw new LogRolledBackError(this.#session, this.#lastSeq, res.lastSeq);
        if (res.outcome === "fenced") throw new FencedError(this.#session, this.#epoch ?? 0, res.epoch);
        if (res.outcome === "conflict") throw new ConflictError(this.#session, -1, res.lastSeq);
        this.#appended(res.lastSeq, events.length, res.outcome === "duplicate");
        return;
      } catch (err) {
        if (isFatal(err)) throw err;
        await this.#backOff(err, attempt);
      }
    }
  }

  #appended(lastSeq: number, count: number, duplicate: boolean): void {
    if (duplicate) this.#stats.duplicates++;
    this.#lastSeq = lastSeq;
    this.#stats.batches++;
    this.#stats.events += count;
    this.#settings.onAppended?.({ firstSeq: lastSeq - count + 1, lastSeq, count, duplicate });
  }

  /** Exponential backoff with jitter, so writers that lost Redis together do not return together. */
  async #backOff(error: unknown, attempt: number): Promise<void> {
    const { backoffInitialMs, backoffMaxMs, logger } = this.#settings;
    this.#stats.retries++;
    const delayMs = backoffDelayMs(attempt, { baseMs: backoffInitialMs, maxMs: backoffMaxMs, jitter: [0.5, 1] });
    logger.warn(
      {
        session: this.#session,
        writer: this.writerId,
        attempt,
        delayMs: Math.round(delayMs),
        err: { message: explainRedisError(error, redisAddress(this.#log.redis), "appending to the event log").message },
      },
      "append failed; retrying",
    );
    this.#settings.onRetry?.({ error, attempt, delayMs });
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }

  #fail(err: Error): void {
    this.#failure = err;
    this.#settings.logger.error(
      { session: this.#session, writer: this.writerId, err: { name: err.name, message: err.message } },
      "event writer stopped",
    );
    this.#settings.onFailed?.(err);
    this.#buffer.wakeWaiters();
    this.#settleFlushes();
  }

  /** Resolves the flushes once the buffer is empty, or rejects them once the writer failed. */
  #settleFlushes(): void {
    if (this.#buffer.length > 0 && this.#failure === undefined) return;
    const waiters = this.#flushWaiters;
    this.#flushWaiters = [];
    for (const waiter of waiters)
      this.#failure === undefined ? waiter.resolve(this.#lastSeq) : waiter.reject(this.#failure);
  }
}

export function createWriter(options: WriterOptions): Writer {
  const writer = new BufferedWriter(options);
  // Plain functions, so a caller may pass writer.write around without binding it.
  return {
    write: (event, writeOptions) => writer.write(event, writeOptions),
    flush: () => writer.flush(),
    close: () => writer.close(),
    writerId: writer.writerId,
    get lastSeq() {
      return writer.lastSeq;
    },
    get pending() {
      return writer.pending;
    },
    get stats() {
      return writer.stats;
    },
    get failure() {
      return writer.failure;
    },
  };
}
