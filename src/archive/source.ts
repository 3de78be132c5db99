// Reads that do not care where a session lives: Redis while it is there, the archive once retention
// has moved it out. Every command and the dashboard read a session's history through SessionHistory,
// so the rule of where to look is written once: a session whose meta is in Redis is read from Redis
// (it may still be running, or was restored); one without meta is read from the archive when the
// archive holds it. A session archived but still in Redis is Redis's: it is the fresher copy.
import {
  IMPORTED_FIELD,
  importedAt,
  type Envelope,
  type EventLog,
  type HistoryReader,
  type ReadOptions,
  type SessionStat,
  type TailOptions,
} from "../log/index.ts";
import type { Archive, ArchivedRecord } from "./archive.ts";
import { RESTORED_FIELD } from "./restore.ts";

/** Where a session's history is read from now, or undefined when neither Redis nor the archive has it. */
export type SessionHome = "redis" | "archive";

const DEFAULT_PAGE = 500;

export class SessionHistory implements HistoryReader {
  readonly log: EventLog;
  readonly archive: Archive | undefined;

  constructor(log: EventLog, archive: Archive | undefined) {
    this.log = log;
    this.archive = archive;
  }

  get prefix(): string {
    return this.log.prefix;
  }

  /** The archive's record of a session Redis has no meta for, or undefined (in Redis, or nowhere). */
  async #archived(session: string): Promise<{ redis: SessionStat; archived: ArchivedRecord | undefined }> {
    const redis = await this.log.stat(session);
    if (redis.exists || this.archive === undefined) return { redis, archived: undefined };
    return { redis, archived: await this.archive.record(session) };
  }

  /** Whether Redis holds the session (its meta): one EXISTS, where the rest of a stat is not needed. */
  async #inRedis(session: string): Promise<boolean> {
    return (await this.log.redis.exists(this.log.keys(session).meta)) === 1;
  }

  /** Where the session is read from: Redis, the archive, or nowhere (undefined). */
  async home(session: string): Promise<SessionHome | undefined> {
    const redis = await this.log.stat(session);
    // The summary alone says the archive holds it: one read of the store, not two.
    if (!redis.exists && (await this.archive?.summary(session)) !== undefined) return "archive";
    return redis.exists || redis.length > 0 ? "redis" : undefined;
  }

  /**
   * The log's stat in Redis; for an archived session, the same figures from its archived meta and
   * summary (`exists` true: the session is known; no expiry, nothing in flight).
   */
  async stat(session: string): Promise<SessionStat> {
    const { redis, archived } = await this.#archived(session);
    if (archived === undefined) return redis;
    const meta = archived.state.meta;
    const lastSeq = archived.summary.lastSeq;
    return {
      session,
      exists: true,
      lastSeq,
      epoch: wholeNumber(meta["epoch"]),
      length: lastSeq,
      turn: meta["turn"],
      attempt: wholeNumber(meta["attempt"]),
      parkedTurn: undefined,
      state: meta["state"],
      lastBatch: undefined,
      expiresInMs: undefined,
    };
  }

  async *read(session: string, options: ReadOptions = {}): AsyncGenerator<Envelope> {
    for await (const page of this.readPages(session, options)) yield* page;
  }

  async *readPages(session: string, options: ReadOptions = {}): AsyncGenerator<Envelope[]> {
    const archived = await this.#archivedEvents(session, options);
    if (archived === undefined) return yield* this.log.readPages(session, options);
    const pageSize = options.pageSize ?? DEFAULT_PAGE;
    for (let start = 0; start < archived.length; start += pageSize) yield archived.slice(start, start + pageSize);
  }

  /**
   * Follows a session in Redis. An archived session has ended: its events from `fromSeq` (those the
   * options' `turn` and `want` accept), then the end, as a tail of Redis would end on its signal.
   */
  async *tail(session: string, options: TailOptions = {}): AsyncGenerator<Envelope> {
    const archived = await this.#archivedEvents(session, { fromSeq: options.fromSeq });
    if (archived === undefined) return yield* this.log.tail(session, options);
    for (const env of archived) {
      if (options.signal?.aborted) return;
      if (options.turn !== undefined && env.turn !== options.turn) continue;
      if (options.want !== undefined && !options.want(env.kind)) continue;
      yield env;
    }
  }

  /** When the session was loaded by `turnstream import` (its meta says so, in Redis or as archived). */
  async importedAt(session: string): Promise<string | undefined> {
    const { archived } = await this.#archived(session);
    return archived === undefined ? importedAt(this.log, session) : archived.state.meta[IMPORTED_FIELD];
  }

  /** When the session was written back from the archive by a restore (its meta in Redis says so). */
  async restoredAt(session: string): Promise<string | undefined> {
    return (await this.log.redis.hget(this.log.keys(session).meta, RESTORED_FIELD)) ?? undefined;
  }

  /**
   * Every session: the archived ones Redis no longer has (in the archive's order), then Redis's
   * index (most recently active last), each once.
   */
  async sessions(): Promise<string[]> {
    const inRedis = await this.log.sessions();
    if (this.archive === undefined) return inRedis;
    const known = new Set(inRedis);
    const archivedOnly: string[] = [];
    for await (const session of this.archive.sessions()) {
      if (known.has(session)) continue;
      known.add(session);
      archivedOnly.push(session);
    }
    return [...archivedOnly, ...inRedis];
  }

  /** Closes the archive (the log's Redis is its owner's to close). */
  async close(): Promise<void> {
    await this.archive?.close();
  }

  /**
   * The archived events from `fromSeq` to `toSeq` of a session Redis has no meta for, or undefined
   * when it is Redis's (or the archive has none of it). Handed out only once the whole copy has been
   * read: a store checks the copy against its digest when a read reaches the end, and an edited event
   * must be refused before anything of it is printed, not after. Held in memory meanwhile, like a
   * session a command reads whole.
   */
  async #archivedEvents(session: string, options: ReadOptions): Promise<Envelope[] | undefined> {
    if (this.archive === undefined || (await this.#inRedis(session))) return undefined;
    const from = options.fromSeq ?? 1;
    const to = options.toSeq ?? Number.POSITIVE_INFINITY;
    const wanted: Envelope[] = [];
    let found = false;
    for await (const env of this.archive.read(session)) {
      found = true;
      if (env.seq >= from && env.seq <= to) wanted.push(env);
    }
    return found ? wanted : undefined;
  }
}

/** A number from an archived meta field (untrusted text): a whole number ≥ 0, else 0. */
function wholeNumber(text: string | undefined): number {
  const value = Number(text ?? 0);
  return Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

/** A session's events from `fromSeq` to `toSeq`, from Redis, else the archive (see SessionHistory). */
export function sessionEvents(
  log: EventLog,
  archive: Archive | undefined,
  session: string,
  options: ReadOptions = {},
): AsyncGenerator<Envelope> {
  return new SessionHistory(log, archive).read(session, options);
}
