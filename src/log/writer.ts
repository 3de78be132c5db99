// A buffered writer for one session and one epoch (or unfenced). It batches events, keeps exactly
// one batch in flight (so batch ids stay in order even across reconnects and cluster redirects, which
// is what makes "n not above the last seen n" a sound duplicate test), retries with backoff while
// Redis is unreachable, and applies backpressure: `write` waits while the buffer is full. It never
// drops an event and never appends one twice. A fenced epoch fails the writer with FencedError.
import type { EventInput } from "./envelope.ts";
import { ConflictError, FencedError, UnfencedKindError, WriterClosedError } from "./errors.ts";
import { newWriterId, type EncodedEvent, type EventLog } from "./event-log.ts";
import { silentLogger, type Logger } from "../kernel/index.ts";

export interface WriterOptions {
  log: EventLog;
  session: string;
  /** The attempt's epoch from beginAttempt, or null for unfenced kinds (producer, operator). */
  epoch: number | null;
  writerId?: string;
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
  /** The error that stopped the writer (FencedError, ...), if any. */
  readonly failure: Error | undefined;
}

// Everything else (connection loss, LOADING after a restart, CLUSTERDOWN, TRYAGAIN, timeouts) is
// retried: giving up would drop events.
function isFatal(err: unknown): boolean {
  return err instanceof FencedError || err instanceof ConflictError;
}

export function createWriter(options: WriterOptions): Writer {
  const { log, session, epoch } = options;
  const writerId = options.writerId ?? newWriterId();
  const maxBatchEvents = options.maxBatchEvents ?? 512;
  const maxBatchBytes = options.maxBatchBytes ?? 1024 * 1024;
  const maxBufferEvents = options.maxBufferEvents ?? 8192;
  const maxBufferBytes = options.maxBufferBytes ?? 16 * 1024 * 1024;
  const initialMs = options.backoff?.initialMs ?? 50;
  const maxMs = options.backoff?.maxMs ?? 2000;
  const logger = options.logger ?? silentLogger;
  log.keys(session); // validates the session id up front

  const buffer: EncodedEvent[] = [];
  let bufferedBytes = 0;
  let batchNo = 0;
  let lastSeq = 0;
  let pumping = false;
  let lingering: NodeJS.Timeout | undefined;
  const lingerMs = options.lingerMs ?? 0;
  let closed = false;
  let failure: Error | undefined;
  const stats: WriterStats = { events: 0, batches: 0, retries: 0, duplicates: 0 };
  let spaceWaiters: (() => void)[] = [];
  let flushWaiters: { resolve: (seq: number) => void; reject: (err: Error) => void }[] = [];

  const hasRoom = (bytes: number): boolean =>
    buffer.length === 0 || (buffer.length < maxBufferEvents && bufferedBytes + bytes <= maxBufferBytes);

  function wakeSpace(): void {
    const waiters = spaceWaiters;
    spaceWaiters = [];
    for (const w of waiters) w();
  }

  function settleFlushes(): void {
    if (buffer.length > 0 && failure === undefined) return;
    const waiters = flushWaiters;
    flushWaiters = [];
    for (const w of waiters) failure === undefined ? w.resolve(lastSeq) : w.reject(failure);
  }

  function fail(err: Error): void {
    failure = err;
    logger.error({ session, writer: writerId, err: { name: err.name, message: err.message } }, "event writer stopped");
    wakeSpace();
    settleFlushes();
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  async function sendBatch(batch: EncodedEvent[]): Promise<void> {
    batchNo++;
    const batchId = `${writerId}:${batchNo}`;
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await log.appendEncoded(session, epoch, batch, { batchId });
        if (res.outcome === "fenced") throw new FencedError(session, epoch ?? 0, res.epoch);
        if (res.outcome === "conflict") throw new ConflictError(session, -1, res.lastSeq);
        const duplicate = res.outcome === "duplicate";
        if (duplicate) stats.duplicates++;
        lastSeq = res.lastSeq;
        stats.batches++;
        stats.events += batch.length;
        options.onAppended?.({ firstSeq: res.lastSeq - batch.length + 1, lastSeq: res.lastSeq, count: batch.length, duplicate });
        return;
      } catch (err) {
        if (isFatal(err)) throw err;
        stats.retries++;
        const delayMs = Math.min(maxMs, initialMs * 2 ** Math.min(attempt - 1, 16)) * (0.5 + Math.random() / 2);
        logger.warn({ session, writer: writerId, attempt, delayMs: Math.round(delayMs), err: { message: (err as Error)?.message } }, "append failed; retrying");
        options.onRetry?.({ error: err, attempt, delayMs });
        await sleep(delayMs);
      }
    }
  }

  async function pump(): Promise<void> {
    if (pumping) return;
    pumping = true;
    try {
      while (buffer.length > 0 && failure === undefined) {
        let count = 0;
        let bytes = 0;
        while (count < buffer.length && count < maxBatchEvents) {
          const b = buffer[count]!.bytes;
          if (count > 0 && bytes + b > maxBatchBytes) break;
          bytes += b;
          count++;
        }
        const batch = buffer.slice(0, count);
        try {
          await sendBatch(batch);
        } catch (err) {
          fail(err instanceof Error ? err : new Error(String(err)));
          return;
        }
        buffer.splice(0, count);
        bufferedBytes -= bytes;
        wakeSpace();
        settleFlushes();
      }
    } finally {
      pumping = false;
    }
  }

  // When the pending linger timer fires (a longer wait asked by one event replaces a shorter one).
  let lingerDue = 0;
  // The pending timer is a hold: the next event replaces it with its own linger.
  let holding = false;

  function kick(now = false, wait = lingerMs, hold = false): void {
    if (holding && lingering !== undefined) {
      clearTimeout(lingering);
      lingering = undefined;
    }
    holding = false;
    if (pumping) return;
    if (now || wait <= 0 || buffer.length >= maxBatchEvents || bufferedBytes >= maxBatchBytes) {
      if (lingering !== undefined) {
        clearTimeout(lingering);
        lingering = undefined;
      }
      queueMicrotask(() => void pump());
      return;
    }
    const due = Date.now() + wait;
    if (lingering !== undefined) {
      // The usual linger never slides (a steady trickle still goes every lingerMs); only a longer
      // wait asked for by one event pushes the send back.
      if (wait <= lingerMs || due <= lingerDue) return;
      clearTimeout(lingering);
    }
    lingerDue = due;
    holding = hold;
    lingering = setTimeout(() => {
      lingering = undefined;
      void pump();
    }, wait);
  }

  async function write(event: EventInput, writeOptions?: WriteOptions): Promise<void> {
    if (failure !== undefined) throw failure;
    if (closed) throw new WriterClosedError(session);
    const enc = log.encode(session, epoch ?? 0, event);
    if (epoch === null && !log.unfencedKinds.has(enc.kind)) throw new UnfencedKindError(enc.kind, [...log.unfencedKinds]);
    while (!hasRoom(enc.bytes)) {
      await new Promise<void>((resolve) => spaceWaiters.push(resolve));
      if (failure !== undefined) throw failure;
    }
    buffer.push(enc);
    bufferedBytes += enc.bytes;
    const hold = writeOptions?.holdMs ?? 0;
    if (hold > 0 && buffer.length === 1) kick(false, hold, true);
    else kick(false, writeOptions?.lingerMs ?? lingerMs);
  }

  function flush(): Promise<number> {
    if (failure !== undefined) return Promise.reject(failure);
    if (buffer.length === 0) return Promise.resolve(lastSeq);
    return new Promise((resolve, reject) => {
      flushWaiters.push({ resolve, reject });
      kick(true);
    });
  }

  async function close(): Promise<number> {
    closed = true;
    const seq = await flush();
    // Every batch is in, so no re-send can need the dedupe entry any more: dropping it is cleanup,
    // not awaited (the end of a turn waits on no more round trips than it must).
    if (batchNo > 0) {
      log.forgetWriter(session, writerId).catch((err: unknown) =>
        logger.debug({ session, writer: writerId, err: { message: (err as Error)?.message } }, "dedupe entry cleanup failed"),
      );
    }
    return seq;
  }

  return {
    write,
    flush,
    close,
    writerId,
    get lastSeq() {
      return lastSeq;
    },
    get pending() {
      return buffer.length;
    },
    get stats() {
      return { ...stats };
    },
    get failure() {
      return failure;
    },
  };
}
