// The event log: one Redis stream per session, appended only through append.lua (fenced, idempotent).
import { createHash, randomBytes } from "node:crypto";
import {
  ENVELOPE_VERSION,
  checkEnvelope,
  eventInputSchema,
  fastEventInput,
  issuesOf,
  type Envelope,
  type EventInput,
} from "./envelope.ts";
import { InvalidEventError, LogRolledBackError, UnfencedKindError } from "./errors.ts";
import { assertPrefix, assertSessionId, DEFAULT_PREFIX, indexKey, seqOfId, sessionKeys, streamId } from "./keys.ts";
import type { SessionKeys } from "./keys.ts";
import { errorReporter, silentLogger, type ErrorReporter, type Logger } from "../kernel/index.ts";
import type { RedisClient } from "./redis.ts";
import { awaitDurable, checkDurability, DurabilityError, MEMORY, type Durability } from "./durability.ts";
import { logScripts, type LogScripts } from "./scripts.ts";
import { storedEnvelope, storedHead } from "./stored-head.ts";
import { explainRedisError, redisAddress } from "./redis-errors.ts";

export type AppendOutcome = "appended" | "duplicate" | "fenced" | "conflict" | "rolled_back";

export interface AppendResult {
  outcome: AppendOutcome;
  /**
   * appended: seq of the batch's last event; duplicate: seq after the writer's latest batch; else the
   * log's last seq (rolled_back: the real head, below what the writer was acknowledged).
   */
  lastSeq: number;
  /** The session's current epoch as the script saw it. */
  epoch: number;
}

export interface AppendOptions {
  /** The last seq the caller believes the log has (0 for an empty log); mismatch → `conflict`. */
  expectedSeq?: number;
  /**
   * The highest seq this writer was told is in the log (its previous batch's last seq, or the head it
   * started from). Others may append past it meanwhile; a log found below it, or missing this batch
   * id's previous batch, lost acknowledged writes → `rolled_back` (see lua/append.lua).
   */
  ackedSeq?: number;
  /**
   * `<writer>:<n>`: per writer id, n strictly increasing, one batch in flight at a time. A batch whose
   * n is not above the writer's last appended n is a `duplicate` (a re-send). Generated when absent.
   */
  batchId?: string;
}

/** One event encoded for storage; `bytes` is what it costs in a writer's buffer. */
export interface EncodedEvent {
  readonly kind: string;
  readonly env: string;
  readonly raw: string | undefined;
  readonly blob: { readonly sha256: string; readonly body: string } | undefined;
  readonly bytes: number;
}

/** Where the session's latest session.snapshot event is, as beginAttempt finds it in the meta. */
export interface SnapshotRef {
  seq: number;
  epoch: number;
  at: string;
}

export interface BeginResult {
  epoch: number;
  attempt: number;
  /** The log's last seq when the attempt began: its writer's first claim (AppendOptions.ackedSeq). */
  lastSeq: number;
  /** The latest snapshot; null: the session has none; undefined: not known here (scan the stream). */
  lastSnapshot: SnapshotRef | null | undefined;
}

function snapshotRef(snap: string): SnapshotRef | null | undefined {
  if (snap === "0") return null;
  const [seq, epoch, at] = snap.split("|");
  const ref = { seq: Number(seq), epoch: Number(epoch), at: at ?? "" };
  return Number.isSafeInteger(ref.seq) && ref.seq > 0 && Number.isSafeInteger(ref.epoch) && ref.at !== ""
    ? ref
    : undefined;
}

export interface SessionStat {
  session: string;
  exists: boolean;
  lastSeq: number;
  epoch: number;
  length: number;
  turn: string | undefined;
  attempt: number;
  state: string | undefined;
  /** The turn that parked last (turn.parked): its attempts resume the parked call. */
  parkedTurn: string | undefined;
  lastBatch: string | undefined;
  /** Milliseconds until the session's keys expire (retention), or undefined when they do not. */
  expiresInMs: number | undefined;
}

export interface ReadOptions {
  /** First seq to read (default 1). */
  fromSeq?: number;
  /** Last seq to read (default the end). */
  toSeq?: number;
  /** Events per XRANGE page. */
  pageSize?: number;
}

export interface TailOptions {
  /** First seq to yield (default 1: the whole history, then live events). */
  fromSeq?: number;
  /** Aborting it ends the tail. */
  signal?: AbortSignal;
  /** Events per read. */
  pageSize?: number;
  /** How long one XREAD BLOCK waits before re-checking the signal. */
  blockMs?: number;
  /**
   * Only this turn's events. Other turns' entries are skipped before they are decoded: a producer
   * waiting for one turn of a busy session would otherwise decode every snapshot and line of the
   * turns around it.
   */
  turn?: string;
  /**
   * Asked for each entry's kind (read from the stored record's head): entries it refuses are passed
   * over without being decoded, so a follower that only needs a turn's lines and its end does not
   * fetch and parse every session snapshot (the largest entries, often stored as blobs).
   */
  want?: (kind: string) => boolean;
}

export interface EventLogOptions {
  /** The Redis (or Redis Cluster) holding the log. */
  redis: RedisClient;
  /** Global key prefix placed before the hash tag; default "ts:". */
  prefix?: string;
  /** Event data above this many bytes goes to a content-addressed blob key; default 256 KiB. */
  blobCapBytes?: number;
  /** Expire all keys of a session this long after its turn finished/failed/was cancelled; 0 = never. */
  finishedTtlMs?: number;
  /** Kinds `appendUnfenced` accepts; default DEFAULT_UNFENCED_KINDS. */
  unfencedKinds?: readonly string[];
  /** Where the log reports retries and outages (pino-compatible). */
  logger?: Logger | undefined;
  /**
   * Told how long each append took, seconds (the Redis round trips and script, blob re-uploads included): the
   * log-append metric.
   */
  onAppend?: ((seconds: number) => void) | undefined;
  /** When an append counts as done (see durability.ts); default `memory`. */
  durability?: Durability | undefined;
}

/**
 * Kinds that are facts from outside any attempt (a producer queueing a turn, an operator deciding or
 * cancelling, a rule being added or revoked, a CLI session's replacement being recorded). They are safe without
 * an epoch because they never depend on what a worker has written: they carry no CLI output, do not continue a
 * sequence a stale attempt could fork, and each is still exactly-once by its batch id. Everything
 * an attempt produces (cli.*, attempt.*, turn.finished/failed, session.snapshot, decision.requested)
 * must be fenced.
 */
export const DEFAULT_UNFENCED_KINDS: readonly string[] = [
  "turn.queued",
  "turn.cancelled",
  "decision.made",
  "rule.added",
  "rule.revoked",
  "session.replaced",
  "session.replayed",
];

export const DEFAULT_BLOB_CAP_BYTES = 256 * 1024;

const WRITER_ID = /^[A-Za-z0-9_.-]{1,64}$/;
const INDEX_TOUCH_MS = 5000;

export function parseBatchId(batchId: string): { writer: string; n: number } {
  const at = batchId.lastIndexOf(":");
  const writer = batchId.slice(0, at);
  const batchNumber = Number(batchId.slice(at + 1));
  if (at <= 0 || !WRITER_ID.test(writer) || !Number.isSafeInteger(batchNumber) || batchNumber <= 0) {
    throw new Error(
      `batch id ${JSON.stringify(batchId.slice(0, 80))} must be "<writer>:<n>" with a writer id of ` +
        `1-64 characters from A-Z a-z 0-9 _ . - and n a positive integer`,
    );
  }
  return { writer, n: batchNumber };
}

export function newWriterId(): string {
  return `w-${randomBytes(9)
    .toString("base64url")
    .replace(/[^A-Za-z0-9]/g, "x")}`;
}

interface StoredRecord {
  v: number;
  turn: string;
  attempt: number;
  epoch: number;
  at: string;
  kind: string;
  data?: unknown;
  cli?: unknown;
  /** blob reference: sha256, byte length, and whether the blob holds the raw line or the data JSON */
  b?: { s: string; n: number; f: "raw" | "json" };
}

function byteLength(text: string): number {
  return text.length * 3 <= 1024 ? text.length * 3 : Buffer.byteLength(text);
}

/** Whether the entry's stored record (field `e`) contains `needle`; a cheap pre-filter, not a parse. */
function storedRecordHas(fields: string[], needle: string): boolean {
  return storedEnvelope(fields)?.includes(needle) ?? true;
}

function rawForm(data: unknown): { raw: string; rest: Record<string, unknown> } | undefined {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return undefined;
  const { raw, ...rest } = data as Record<string, unknown>;
  return typeof raw === "string" ? { raw, rest } : undefined;
}

export class EventLog {
  readonly redis: RedisClient;
  readonly prefix: string;
  readonly blobCapBytes: number;
  readonly finishedTtlMs: number;
  readonly unfencedKinds: ReadonlySet<string>;
  readonly #logger: Logger;
  /** Errors of the tails' own connections, which repeat on every reconnect while Redis is away. */
  readonly #tailErrors: ErrorReporter;
  readonly #onAppend: ((seconds: number) => void) | undefined;
  readonly #scripts: LogScripts;
  readonly durability: Durability;
  /** How `fsync` is confirmed on this server, checked once (a refusal is kept and thrown on every append). */
  #fsyncMode: Promise<"waitaof" | "always" | undefined> | undefined;
  readonly #indexed = new Map<string, number>();
  #indexSwept = 0;

  constructor(options: EventLogOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    assertPrefix(this.prefix);
    this.blobCapBytes = options.blobCapBytes ?? DEFAULT_BLOB_CAP_BYTES;
    this.finishedTtlMs = options.finishedTtlMs ?? 0;
    this.unfencedKinds = new Set(options.unfencedKinds ?? DEFAULT_UNFENCED_KINDS);
    this.#logger = options.logger ?? silentLogger;
    this.#tailErrors = errorReporter(this.#logger);
    this.#onAppend = options.onAppend;
    this.#scripts = logScripts(this.redis);
    this.durability = options.durability ?? MEMORY;
  }

  /** Refuses (DurabilityError) a server that cannot give the log's durability level; memoised. */
  checkDurability(): Promise<"waitaof" | "always" | undefined> {
    this.#fsyncMode ??= checkDurability(this.redis, this.durability).catch((err: unknown) => {
      // A refusal stands; a connection error is asked again next time.
      if (!(err instanceof DurabilityError)) this.#fsyncMode = undefined;
      throw err;
    });
    return this.#fsyncMode;
  }

  /** After an append Redis applied: waits until it holds at the durability level (WAIT on the same client). */
  async #durable(): Promise<void> {
    if (this.durability.level === "memory") return;
    await awaitDurable(this.redis, this.durability, await this.checkDurability());
  }

  keys(session: string): SessionKeys {
    return sessionKeys(this.prefix, session);
  }

  /** Begins an attempt of `turn`: bumps the session's epoch atomically; all earlier epochs are fenced. */
  async beginAttempt(session: string, turn: string): Promise<BeginResult> {
    const keys = this.keys(session);
    if (typeof turn !== "string" || turn.length === 0 || turn.length > 200) {
      throw new Error("turn id must be a non-empty string of at most 200 characters");
    }
    // Both sent at once: the index update need not wait for the epoch, only be done on return.
    const [[epoch, attempt, snap, seq]] = await Promise.all([
      this.#scripts.begin([keys.events, keys.meta, keys.blobs], turn),
      this.#touchIndex(session),
    ]);
    return {
      epoch: Number(epoch),
      attempt: Number(attempt),
      lastSeq: Number(seq ?? 0),
      lastSnapshot: snapshotRef(String(snap ?? "")),
    };
  }

  /** Validates and encodes one event for `append`/`appendEncoded`; throws InvalidEventError. */
  encode(session: string, epoch: number, event: EventInput): EncodedEvent {
    let input = fastEventInput(event);
    if (input === undefined) {
      const parsed = eventInputSchema.safeParse(event);
      if (!parsed.success) throw new InvalidEventError(session, undefined, issuesOf(parsed.error));
      input = parsed.data;
    }
    const rec: StoredRecord = {
      v: ENVELOPE_VERSION,
      turn: input.turn,
      attempt: input.attempt,
      epoch,
      at: input.at ?? new Date().toISOString(),
      kind: input.kind,
    };
    if (input.cli !== undefined) rec.cli = input.cli;
    const rf = rawForm(input.data);
    if (rf !== undefined) {
      rec.data = rf.rest;
      let env = JSON.stringify(rec);
      const rawBytes = byteLength(rf.raw);
      const envBytes = byteLength(env);
      if (rawBytes + envBytes <= this.blobCapBytes) {
        return { kind: input.kind, env, raw: rf.raw, blob: undefined, bytes: rawBytes + envBytes };
      }
      if (envBytes <= this.blobCapBytes) {
        const sha256 = createHash("sha256").update(rf.raw).digest("hex");
        rec.b = { s: sha256, n: rawBytes, f: "raw" };
        env = JSON.stringify(rec);
        return { kind: input.kind, env, raw: undefined, blob: { sha256, body: rf.raw }, bytes: rawBytes + envBytes };
      }
      delete rec.data;
    }
    const dataJson = JSON.stringify(input.data);
    const dataBytes = byteLength(dataJson);
    if (dataBytes <= this.blobCapBytes) {
      rec.data = input.data;
      const env = JSON.stringify(rec);
      return { kind: input.kind, env, raw: undefined, blob: undefined, bytes: byteLength(env) };
    }
    delete rec.data;
    const sha256 = createHash("sha256").update(dataJson).digest("hex");
    rec.b = { s: sha256, n: dataBytes, f: "json" };
    const env = JSON.stringify(rec);
    return {
      kind: input.kind,
      env,
      raw: undefined,
      blob: { sha256, body: dataJson },
      bytes: dataBytes + byteLength(env),
    };
  }

  /** Appends a batch written by the attempt holding `epoch`. */
  async append(
    session: string,
    epoch: number,
    events: readonly EventInput[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    if (!Number.isSafeInteger(epoch) || epoch < 0)
      throw new Error("epoch must be a non-negative integer from beginAttempt");
    const encoded = events.map((ev) => this.encode(session, epoch, ev));
    return this.appendEncoded(session, epoch, encoded, options);
  }

  /**
   * Appends events that are not bound to an attempt (see DEFAULT_UNFENCED_KINDS); no epoch check.
   * Their envelope epoch is 0. Still exactly-once per batch id, still ordered by the one script.
   */
  async appendUnfenced(
    session: string,
    events: readonly EventInput[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    for (const ev of events) {
      if (!this.unfencedKinds.has(ev.kind)) throw new UnfencedKindError(ev.kind, [...this.unfencedKinds]);
    }
    const encoded = events.map((ev) => this.encode(session, 0, ev));
    return this.appendEncoded(session, null, encoded, options);
  }

  /**
   * Low level: appends already-encoded events. `epoch` null skips the fencing check (callers must
   * enforce the unfenced-kind rule; import uses this with `epochFloor`).
   */
  async appendEncoded(
    session: string,
    epoch: number | null,
    events: readonly EncodedEvent[],
    options: AppendOptions & { epochFloor?: number | undefined } = {},
  ): Promise<AppendResult> {
    const keys = this.keys(session);
    const auto = options.batchId === undefined;
    const { writer, n: batchNumber } = auto ? { writer: newWriterId(), n: 1 } : parseBatchId(options.batchId!);
    if (events.length === 0) {
      const st = await this.stat(session);
      const behind = st.lastSeq < Math.max(options.ackedSeq ?? 0, options.expectedSeq ?? 0);
      return { outcome: behind ? "rolled_back" : "appended", lastSeq: st.lastSeq, epoch: st.epoch };
    }
    const blobKeys: string[] = [];
    for (const ev of events) if (ev.blob !== undefined) blobKeys.push(keys.blob(ev.blob.sha256));
    const argv: (string | number)[] = [
      epoch === null ? "" : epoch,
      options.expectedSeq === undefined ? "" : options.expectedSeq,
      writer,
      batchNumber,
      this.finishedTtlMs,
      options.epochFloor === undefined ? "" : options.epochFloor,
      options.ackedSeq === undefined ? "" : options.ackedSeq,
      blobKeys.length,
      ...blobKeys,
    ];
    for (const ev of events) {
      if (ev.raw === undefined) argv.push("e", ev.kind, ev.env);
      else argv.push("r", ev.kind, ev.env, ev.raw);
    }
    let reply: [string, number, number] | undefined;
    const began = this.#onAppend === undefined ? 0 : performance.now();
    for (let tries = 0; tries < 3; tries++) {
      await this.#uploadBlobs(keys, events);
      reply = await this.#scripts.append([keys.events, keys.meta, keys.blobs], argv);
      if (reply[0] !== "missing_blob") break;
      this.#logger.warn({ session }, "blob expired between upload and append; uploading again");
    }
    if (this.#onAppend !== undefined) this.#onAppend((performance.now() - began) / 1000);
    const [outcome, lastSeq, current] = reply!;
    if (outcome === "missing_blob")
      throw new Error(`session ${session}: blobs keep expiring before the append; check retention settings`);
    if (auto && (outcome === "appended" || outcome === "duplicate")) {
      // The reply is in, so this client will never re-send the batch: its dedupe entry can go.
      this.redis
        .hdel(keys.meta, `w:${writer}`)
        .catch((err: unknown) => this.#logger.debug({ err, session }, "dedupe entry cleanup failed"));
    }
    // A duplicate is a re-send of a batch that got in: it may be the one whose confirmation timed out.
    if (outcome === "appended" || outcome === "duplicate") await this.#durable();
    if (outcome === "appended") void this.#touchIndex(session);
    return { outcome: outcome as AppendOutcome, lastSeq: Number(lastSeq), epoch: Number(current) };
  }

  /** Drops a writer's dedupe entry once it has no batch in flight (writer close). */
  async forgetWriter(session: string, writer: string): Promise<void> {
    await this.redis.hdel(this.keys(session).meta, `w:${writer}`);
  }

  async #uploadBlobs(keys: SessionKeys, events: readonly EncodedEvent[]): Promise<void> {
    const seen = new Set<string>();
    for (const ev of events) {
      if (ev.blob === undefined || seen.has(ev.blob.sha256)) continue;
      seen.add(ev.blob.sha256);
      // Plain SET (not NX): content-addressed, so overwriting is harmless and it clears a retention TTL.
      await this.redis.set(keys.blob(ev.blob.sha256), ev.blob.body);
    }
  }

  // The index is a hint, refreshed at most every INDEX_TOUCH_MS per session by this process: not
  // awaited on the append path; beginAttempt awaits it, so a session is listed once its first
  // attempt has begun (a later attempt within the interval finds it listed already).
  async #touchIndex(session: string): Promise<void> {
    const now = Date.now();
    const last = this.#indexed.get(session);
    if (last !== undefined && now - last < INDEX_TOUCH_MS) return;
    if (now - this.#indexSwept >= INDEX_TOUCH_MS) {
      // Entries past the interval decide nothing: dropping them keeps the map to the sessions active lately.
      this.#indexSwept = now;
      for (const [indexedSession, at] of this.#indexed)
        if (now - at >= INDEX_TOUCH_MS) this.#indexed.delete(indexedSession);
    }
    this.#indexed.set(session, now);
    await this.redis
      .zadd(indexKey(this.prefix), now, session)
      .catch((err: unknown) => this.#logger.debug({ err, session }, "session index update failed"));
  }

  /** One stored entry → envelope. Synchronous unless the entry references a blob. */
  #decode(session: string, keys: SessionKeys, id: string, fields: string[]): Envelope | Promise<Envelope> {
    const seq = seqOfId(id);
    let env: string | undefined;
    let raw: string | undefined;
    for (let index = 0; index + 1 < fields.length; index += 2) {
      if (fields[index] === "e") env = fields[index + 1];
      else if (fields[index] === "r") raw = fields[index + 1];
    }
    let rec: StoredRecord;
    try {
      rec = JSON.parse(env ?? "null") as StoredRecord;
    } catch {
      throw new InvalidEventError(session, seq, ["stored entry is not JSON"]);
    }
    if (rec === null || typeof rec !== "object")
      throw new InvalidEventError(session, seq, ["stored entry has no envelope"]);
    if (rec.b !== undefined) return this.#decodeBlob(session, keys, seq, rec, raw);
    return this.#finish(session, seq, rec, raw, rec.data);
  }

  async #decodeBlob(
    session: string,
    keys: SessionKeys,
    seq: number,
    rec: StoredRecord,
    raw: string | undefined,
  ): Promise<Envelope> {
    const blobRef = rec.b!;
    let data: unknown = rec.data;
    const body = await this.redis.get(keys.blob(blobRef.s));
    if (body === null) throw new InvalidEventError(session, seq, [`blob ${blobRef.s} is missing`]);
    if (blobRef.f === "raw") raw = body;
    else data = JSON.parse(body);
    delete rec.b;
    return this.#finish(session, seq, rec, raw, data);
  }

  // `rec` is a freshly parsed entry of our own, so it is completed in place instead of copied.
  #finish(session: string, seq: number, rec: StoredRecord, raw: string | undefined, data: unknown): Envelope {
    const out = Object.assign(rec, {
      data: raw === undefined ? data : { raw, ...(data as Record<string, unknown>) },
      seq,
      session,
    });
    const checked = checkEnvelope(out);
    if (!checked.success) throw new InvalidEventError(session, seq, checked.issues);
    return checked.data;
  }

  /**
   * Events of a session in seq order, one XRANGE page at a time. The next page is requested before
   * the current one is handed out, so Redis prepares it while the caller works. A page that holds an
   * invalid entry yields the events before it, then throws.
   */
  async *readPages(session: string, options: ReadOptions = {}): AsyncGenerator<Envelope[]> {
    const keys = this.keys(session);
    const pageSize = options.pageSize ?? 500;
    if (!Number.isSafeInteger(pageSize) || pageSize < 1) throw new Error("pageSize must be a positive integer");
    const to = options.toSeq;
    const end = to === undefined ? "+" : streamId(to);
    const fetch = (from: number): Promise<[string, string[]][]> =>
      this.redis.xrange(keys.events, streamId(from), end, "COUNT", pageSize);
    const first = Math.max(1, options.fromSeq ?? 1);
    if (to !== undefined && first > to) return;
    let pending: Promise<[string, string[]][]> | undefined = fetch(first);
    while (pending !== undefined) {
      const page = await pending;
      pending = undefined;
      if (page.length === pageSize) {
        const next = seqOfId(page[page.length - 1]![0]) + 1;
        if (to === undefined || next <= to) {
          pending = fetch(next);
          // Rejections surface when awaited above; a consumer that stops early never awaits it.
          pending.catch(() => {});
        }
      }
      const out: Envelope[] = new Array(page.length);
      for (let index = 0; index < page.length; index++) {
        const [id, fields] = page[index]!;
        let envelope: Envelope | Promise<Envelope>;
        try {
          envelope = this.#decode(session, keys, id, fields);
          if (envelope instanceof Promise) envelope = await envelope;
        } catch (err) {
          out.length = index;
          if (index > 0) yield out;
          throw err;
        }
        out[index] = envelope;
      }
      if (out.length > 0) yield out;
    }
  }

  /** Events of a session in seq order, paged with XRANGE (see readPages). */
  async *read(session: string, options: ReadOptions = {}): AsyncGenerator<Envelope> {
    for await (const page of this.readPages(session, options)) yield* page;
  }

  /**
   * Follows a session from `fromSeq` on (XREAD BLOCK on a connection of its own, so blocking never
   * stalls other commands). Ends when `signal` aborts or the consumer stops iterating.
   */
  async *tail(session: string, options: TailOptions = {}): AsyncGenerator<Envelope> {
    const keys = this.keys(session);
    const signal = options.signal;
    if (signal?.aborted) return;
    const conn = this.redis.duplicate();
    // Without a listener ioredis prints each connection error, stack and all, to the console.
    conn.on("error", (err: Error) =>
      this.#tailErrors("redis connection error", explainRedisError(err, redisAddress(conn)), { connection: "tail" }),
    );
    const onAbort = (): void => conn.disconnect();
    signal?.addEventListener("abort", onAbort, { once: true });
    // The stored record is JSON with `turn` among its first keys; turn ids need no escaping in JSON.
    const needle = options.turn === undefined ? undefined : `"turn":${JSON.stringify(options.turn)},`;
    try {
      let last = Math.max(1, options.fromSeq ?? 1) - 1;
      // The highest seq this tail has read: a stream found below it lost events the tail saw.
      let seen = 0;
      while (!signal?.aborted) {
        let res: [string, [string, string[]][]][] | null;
        try {
          res = (await conn.xread(
            "COUNT",
            options.pageSize ?? 500,
            "BLOCK",
            options.blockMs ?? 2000,
            "STREAMS",
            keys.events,
            streamId(last),
          )) as [string, [string, string[]][]][] | null;
        } catch (err) {
          if (signal?.aborted) return;
          throw err;
        }
        if (res === null) {
          if (seen > 0) await this.#checkNotBehind(conn, session, keys, seen);
          continue;
        }
        seen = Math.max(seen, ...res.flatMap(([, entries]) => entries.map(([id]) => seqOfId(id))));
        for (const [, entries] of res) {
          for (const [id, fields] of entries) {
            if (needle !== undefined && !storedRecordHas(fields, needle)) {
              last = seqOfId(id);
              continue;
            }
            if (options.want !== undefined) {
              const kind = storedHead(storedEnvelope(fields))?.kind;
              if (kind !== undefined && !options.want(kind)) {
                last = seqOfId(id);
                continue;
              }
            }
            const ev = await this.#decode(session, keys, id, fields);
            last = ev.seq;
            yield ev;
            if (signal?.aborted) return;
          }
        }
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      conn.disconnect();
    }
  }

  /**
   * A quiet tail checks that the stream still reaches what it has read: after a failover that lost
   * writes, events would come again under seqs it has passed, and it would wait forever for the rest.
   */
  async #checkNotBehind(conn: RedisClient, session: string, keys: SessionKeys, seen: number): Promise<void> {
    const head = (await conn.xrevrange(keys.events, "+", "-", "COUNT", 1)) as [string, string[]][];
    const lastSeq = head.length === 0 ? 0 : seqOfId(head[0]![0]);
    if (lastSeq < seen) throw new LogRolledBackError(session, seen, lastSeq);
  }

  /** Session ids from the index, most recently active last. A hint: entries whose meta is gone are pruned. */
  async sessions(): Promise<string[]> {
    const key = indexKey(this.prefix);
    const ids = await this.redis.zrange(key, 0, -1);
    const alive = await Promise.all(ids.map((id) => this.redis.exists(this.keys(id).meta)));
    const gone = ids.filter((_, i) => alive[i] === 0);
    if (gone.length > 0) await this.redis.zrem(key, ...gone);
    return ids.filter((_, i) => alive[i] === 1);
  }

  async stat(session: string): Promise<SessionStat> {
    const keys = this.keys(session);
    const [meta, length, pttl] = await Promise.all([
      this.redis.hgetall(keys.meta),
      this.redis.xlen(keys.events),
      this.redis.pttl(keys.meta),
    ]);
    const exists = Object.keys(meta).length > 0;
    return {
      session,
      exists,
      lastSeq: Number(meta["seq"] ?? 0),
      epoch: Number(meta["epoch"] ?? 0),
      length,
      turn: meta["turn"],
      attempt: Number(meta["attempt"] ?? 0),
      state: meta["state"],
      parkedTurn: meta["parkedTurn"],
      lastBatch: meta["lastBatch"],
      expiresInMs: pttl >= 0 ? pttl : undefined,
    };
  }

  /** Deletes every key of a session (tests, operators). */
  async destroy(session: string): Promise<void> {
    const keys = this.keys(session);
    const blobs = await this.redis.smembers(keys.blobs);
    for (const blobKey of blobs) await this.redis.del(blobKey);
    await this.redis.del(keys.events);
    await this.redis.del(keys.meta);
    await this.redis.del(keys.blobs);
    this.#indexed.delete(session);
    await this.redis.zrem(indexKey(this.prefix), session);
  }
}

/**
 * What reading a session's history takes: the event log itself, or a reader that finds a session
 * wherever it lives now (src/archive's SessionHistory: Redis, else the archive).
 */
export type HistoryReader = Pick<EventLog, "prefix" | "stat" | "read" | "readPages" | "tail">;

/** The event log on this Redis: one stream per session, appended through a fenced, idempotent Lua script. */
export function createEventLog(options: EventLogOptions): EventLog {
  return new EventLog(options);
}

export { assertSessionId };
