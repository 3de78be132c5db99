// Retention: a session that ended long enough ago leaves Redis, its whole history kept in the archive
// first. Each session goes copy → put → verify (the store's digest, recomputed from what it reads
// back, equals the copy's) → the fenced removal script → the index entry, read models and job
// records. Every step is safe to repeat and a crash between any two loses nothing: the removal only
// runs after the archive verifiably holds the copy, and refuses when the session moved since.
import type { Queue } from "bullmq";
import { TurnstreamError } from "../kernel/index.ts";
import { indexKey, type EventLog, type RedisClient } from "../log/index.ts";
import { deleteProjection, PROJECTION_VERSION, projectionKeys } from "../projector/index.ts";
import { orderKeys, retireSession, turnRecordKey, DEFAULT_QUEUE_PREFIX, type RetireOutcome } from "../queue/index.ts";
import type { Archive, SessionCopy } from "./archive.ts";
import { copyOfSession } from "./copy.ts";
import { sameDigest } from "./digest.ts";

export type RetentionAction = "archived" | "removed" | "kept" | "failed";

export interface RetentionEntry {
  session: string;
  /** archived: copied, verified and removed; removed: removed without a copy (--discard-history). */
  action: RetentionAction;
  /** Why it was kept or failed, or what a dry run would have done. */
  reason?: string;
  lastSeq?: number;
}

export interface RetentionReport {
  dryRun: boolean;
  olderThanMs: number;
  archive: string | undefined;
  sessions: RetentionEntry[];
}

/** The steps of one session's retention, for tests that stop it between two of them. */
export type RetentionStep = "copied" | "stored" | "verified" | "retired" | "read-models" | "job-records" | "unindexed";

export interface RetentionOptions {
  /** The event log whose sessions are considered (its prefix names the keys). */
  log: EventLog;
  /** The Redis the log and the queue live on, for the fenced removal. */
  redis: RedisClient;
  /** The turn queue whose job records (job id = turn id) go with the session. */
  queue: Queue;
  /** Where the history goes first; without one nothing is removed unless discardHistory. */
  archive: Archive | undefined;
  /** Only sessions whose last activity is older than this. */
  olderThanMs: number;
  /** Remove sessions without an archive copy: their history is gone for good. */
  discardHistory?: boolean;
  /** Report what would happen; change nothing (not even the archive). */
  dryRun?: boolean;
  /** The time ages are measured from (ms since the epoch); default now. */
  now?: number;
  /** Called after each step of each session (tests stop a run here). */
  afterStep?: (session: string, step: RetentionStep) => Promise<void>;
}

/** A session retention found another writer in: kept, with the reason. */
class Kept extends TurnstreamError {
  constructor(reason: string) {
    super(reason, { code: "retention_kept" });
  }
}

const TERMINAL_STATES = new Set(["finished", "failed", "cancelled"]);

const KEPT_BECAUSE: Record<Exclude<RetireOutcome, "removed" | "gone">, string> = {
  pending: "a turn was enqueued after the copy",
  leased: "an attempt holds the session's lease",
  restoring: "a restore is writing the session back",
  appended: "events were appended after the copy",
  registered: "a turn was enqueued after the copy",
};

class SessionRetention {
  readonly #options: RetentionOptions;
  readonly #session: string;
  readonly #cutoff: number;

  constructor(options: RetentionOptions, session: string, cutoff: number) {
    this.#options = options;
    this.#session = session;
    this.#cutoff = cutoff;
  }

  async run(): Promise<RetentionEntry> {
    const { log, redis } = this.#options;
    const session = this.#session;
    if ((await redis.exists(log.keys(session).meta)) === 0) return this.#finishGone();
    const notEnded = await this.#notEnded();
    if (notEnded !== undefined) return { session, action: "kept", reason: notEnded };
    const copy = await copyOfSession(log, redis, session);
    await this.#step("copied");
    const lastAt = copy.events.at(-1)?.at;
    if (lastAt !== undefined && Date.parse(lastAt) > this.#cutoff)
      return { session, action: "kept", reason: `active at ${lastAt}`, lastSeq: copy.digest.lastSeq };
    const archive = this.#options.archive;
    if (archive === undefined && this.#options.discardHistory !== true)
      return {
        session,
        action: "kept",
        reason: "no archive configured (TURNSTREAM_ARCHIVE), and history is not discarded",
      };
    const action = archive === undefined ? "removed" : "archived";
    if (this.#options.dryRun === true) return { session, action, reason: "dry run", lastSeq: copy.digest.lastSeq };
    if (archive !== undefined) await this.#store(archive, copy);
    const retired = await retireSession(redis, log.prefix, session, {
      lastSeq: copy.digest.lastSeq,
      registered: Object.keys(copy.state.registered).length,
      alsoDelete: this.#readModelKeys(),
    });
    if (retired.outcome !== "removed" && retired.outcome !== "gone")
      return { session, action: "kept", reason: KEPT_BECAUSE[retired.outcome], lastSeq: copy.digest.lastSeq };
    await this.#step("retired");
    await this.#afterRemoval(Object.keys(copy.state.registered));
    return { session, action, lastSeq: copy.digest.lastSeq };
  }

  async #step(step: RetentionStep): Promise<void> {
    await this.#options.afterStep?.(this.#session, step);
  }

  /** Why the session has not ended, or undefined when it has. */
  async #notEnded(): Promise<string | undefined> {
    const { log, redis } = this.#options;
    const order = orderKeys(log.prefix, this.#session);
    const [pending, leased, meta, registered] = await Promise.all([
      redis.llen(order.turns),
      redis.exists(order.lease),
      redis.hmget(log.keys(this.#session).meta, "state", "restoring"),
      redis.hlen(order.registered),
    ]);
    if (pending > 0) return `${pending} turn(s) pending`;
    if (leased === 1) return "an attempt holds the session's lease";
    const [state, restoring] = meta;
    if (restoring !== null && restoring !== undefined) return "a restore is writing the session back";
    if (typeof state === "string" ? !TERMINAL_STATES.has(state) : registered > 0) return `state ${state ?? "unknown"}`;
    return undefined;
  }

  /** Puts the copy and checks the store reads back exactly it (a put is idempotent: a rerun repeats it). */
  async #store(archive: Archive, copy: SessionCopy): Promise<void> {
    await archive.put(copy);
    await this.#step("stored");
    const stored = await archive.digest(this.#session);
    if (stored === undefined || !sameDigest(stored, copy.digest))
      throw new Kept(
        `the archive at ${archive.location} reads back ${stored === undefined ? "nothing" : `${stored.count} events (sha256 ${stored.sha256.slice(0, 12)})`} for this session, not the ${copy.digest.count} copied; the session stays in Redis`,
      );
    await this.#step("verified");
  }

  /** The session's log is already gone (an earlier run stopped after its removal): finish what it left. */
  async #finishGone(): Promise<RetentionEntry> {
    const session = this.#session;
    const archive = this.#options.archive;
    const state = archive === undefined ? undefined : await archive.state(session);
    if (this.#options.dryRun === true)
      return { session, action: "removed", reason: "dry run: only its index entry is left" };
    await this.#afterRemoval(Object.keys(state?.registered ?? {}));
    return { session, action: state === undefined ? "removed" : "archived", reason: "its log was already gone" };
  }

  #readModelKeys(): string[] {
    const keys = projectionKeys(this.#options.log.prefix, this.#session, PROJECTION_VERSION);
    const models = Array.from({ length: PROJECTION_VERSION }, (_, index) => keys.modelOf(index + 1));
    return [...models, keys.pointer];
  }

  /**
   * What lives outside the session's slot: its read models (again: a projector may have committed
   * after the script), its job records, and last its index entry, which is what a rerun finds the
   * session by when a run stopped before the end.
   */
  async #afterRemoval(turns: readonly string[]): Promise<void> {
    const { log, redis, queue } = this.#options;
    const session = this.#session;
    const versions = Array.from({ length: PROJECTION_VERSION }, (_, index) => index + 1);
    await deleteProjection(redis, session, versions, log.prefix);
    await this.#step("read-models");
    const queuePrefix = queue.opts.prefix ?? DEFAULT_QUEUE_PREFIX;
    for (const turn of turns) {
      await queue.remove(turn);
      await redis.del(turnRecordKey(queuePrefix, turn));
    }
    await this.#step("job-records");
    const index = indexKey(log.prefix);
    await redis.zrem(index, session);
    // A turn enqueued right after the removal started a new log: it stays listed.
    if ((await redis.exists(log.keys(session).meta)) === 1) await redis.zadd(index, Date.now(), session);
    await this.#step("unindexed");
  }
}

/** Sessions of the index whose last append is older than the cutoff (the index is a hint: each is checked again). */
async function candidates(log: EventLog, redis: RedisClient, cutoff: number): Promise<string[]> {
  return redis.zrangebyscore(indexKey(log.prefix), "-inf", `(${cutoff}`);
}

/** Archives and removes every ended session older than `olderThanMs`; one entry per candidate. */
export async function runRetention(options: RetentionOptions): Promise<RetentionReport> {
  const now = options.now ?? Date.now();
  const cutoff = now - options.olderThanMs;
  const sessions: RetentionEntry[] = [];
  for (const session of await candidates(options.log, options.redis, cutoff)) {
    try {
      sessions.push(await new SessionRetention(options, session, cutoff).run());
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      sessions.push({ session, action: err instanceof Kept ? "kept" : "failed", reason });
    }
  }
  return {
    dryRun: options.dryRun === true,
    olderThanMs: options.olderThanMs,
    archive: options.archive?.location,
    sessions,
  };
}
