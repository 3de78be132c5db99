// Restore: an archived session that retention removed from Redis is written back, with the same seqs
// and epochs and the state that is not in its events (meta, conf, registered turn ids), so a new turn
// resumes the CLI session from the log's latest snapshot and an old turn id enqueued again stays a
// no-op. Two restorers (two producers enqueueing to the same session) take turns on a lock key; a
// restore that died half-way is noticed by its `restoring` meta mark and started over.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { TurnstreamError } from "../kernel/index.ts";
import { importEnvelopes, type EventLog, type RedisClient } from "../log/index.ts";
import { orderKeys, restoringKey, TURN_ID_PATTERN } from "../queue/index.ts";
import { TENANT_NAME_PATTERN } from "../tenants/index.ts";
import type { Archive, SessionState } from "./archive.ts";
import { logDigest, sameDigest } from "./digest.ts";

/** An archived state that turnstream could not have written: refused before anything is restored. */
export class RestoreRefusedError extends TurnstreamError {
  constructor(session: string, archive: string, reason: string) {
    super(
      `session ${session} in the archive at ${archive}: ${reason}; the archived copy was changed after it was ` +
        `written: fix or remove it there, then enqueue again`,
      { code: "restore_refused" },
    );
  }
}

/**
 * The meta field a restore sets (to when it wrote the session back): the session's history came from
 * the archive, whose state (the `imported` mark among it) anyone with access to the store can edit,
 * so a re-run trusts it no more than an import. Set by each restore, never taken from the archive.
 */
export const RESTORED_FIELD = "restored";

/** Meta fields the append script or the restore computes itself: never taken from the archive. */
const COMPUTED_META = new Set(["seq", "sseq", "lastId", "lastBatch", "snap", "expiring", "restoring", RESTORED_FIELD]);
const STATES = new Set(["queued", "running", "finished", "failed", "cancelled"]);
const CONF_FIELDS: Record<string, RegExp> = {
  onLostSession: /^(fail|restore)$/,
  warm: /^[01]$/,
  // The session's tenant, fixed by its first turn: a restored session stays its tenant's.
  tenant: TENANT_NAME_PATTERN,
};
const DECIMAL = /^\d{1,15}$/;
const WRITER_RECORD = /^(\d{1,15}):(\d{1,15})$/;
const MAX_FIELD = 300;

/** The mark a restore leaves on meta until it has written everything; the retire script refuses while it is there. */
const RESTORING_FIELD = "restoring";
const LOCK_MS = 60_000;

/** The meta fields a restore writes after the events, each checked as what turnstream itself writes. */
function restoredMeta(state: SessionState, lastSeq: number, epochFloor: number, refuse: (why: string) => never) {
  const out: Record<string, string> = {};
  for (const [field, value] of Object.entries(state.meta)) {
    if (COMPUTED_META.has(field)) continue;
    if (field.length > MAX_FIELD || value.length > MAX_FIELD)
      refuse(`meta field ${JSON.stringify(field.slice(0, 40))} is too long`);
    if (field === "epoch" || field === "attempt") {
      if (!DECIMAL.test(value)) refuse(`meta ${field} ${JSON.stringify(value.slice(0, 20))} is not a count`);
    } else if (field === "state") {
      if (!STATES.has(value)) refuse(`meta state ${JSON.stringify(value.slice(0, 20))} is not a turn state`);
    } else if (field.startsWith("w:")) {
      const record = WRITER_RECORD.exec(value);
      if (record === null || Number(record[2]) > lastSeq)
        refuse(`writer record ${JSON.stringify(field.slice(0, 40))} names a batch past the archived log`);
    } else if (field !== "turn" && field !== "imported") {
      refuse(`meta field ${JSON.stringify(field.slice(0, 40))} is not one turnstream writes`);
    }
    out[field] = value;
  }
  // Never below an archived event's epoch: a worker of that time must stay fenced.
  out["epoch"] = String(Math.max(Number(out["epoch"] ?? 0), epochFloor));
  out[RESTORED_FIELD] = new Date().toISOString();
  return out;
}

function checkedConf(conf: Record<string, string>, refuse: (why: string) => never): Record<string, string> {
  for (const [field, value] of Object.entries(conf))
    if (CONF_FIELDS[field]?.test(value) !== true)
      refuse(`session setting ${JSON.stringify(field.slice(0, 40))} is not valid`);
  return conf;
}

function checkedRegistered(registered: Record<string, string>, refuse: (why: string) => never): Record<string, string> {
  for (const [turn, at] of Object.entries(registered))
    if (!TURN_ID_PATTERN.test(turn) || !DECIMAL.test(at))
      refuse(`registered turn ${JSON.stringify(turn.slice(0, 40))} is not valid`);
  return registered;
}

export type RestoreOutcome = "restored" | "present" | "not-archived";

class SessionRestore {
  readonly #log: EventLog;
  readonly #redis: RedisClient;
  readonly #archive: Archive;
  readonly #session: string;

  constructor(log: EventLog, redis: RedisClient, archive: Archive, session: string) {
    this.#log = log;
    this.#redis = redis;
    this.#archive = archive;
    this.#session = session;
  }

  readonly #refuse = (why: string): never => {
    throw new RestoreRefusedError(this.#session, this.#archive.location, why);
  };

  async run(): Promise<RestoreOutcome> {
    const lock = restoringKey(this.#log.prefix, this.#session);
    const meta = this.#log.keys(this.#session).meta;
    for (;;) {
      const [held, present, interrupted] = await Promise.all([
        this.#redis.exists(lock),
        this.#redis.exists(meta),
        this.#redis.hexists(meta, RESTORING_FIELD),
      ]);
      if (held === 1) {
        // Another restorer is writing the session back: it is present once its lock is gone.
        await sleep(25);
        continue;
      }
      if (present === 1 && interrupted === 0) return "present";
      const token = randomUUID();
      if ((await this.#redis.set(lock, token, "PX", LOCK_MS, "NX")) !== "OK") continue;
      try {
        return await this.#restoreHeld(interrupted === 1);
      } finally {
        if ((await this.#redis.get(lock)) === token) await this.#redis.del(lock);
      }
    }
  }

  /** With the lock held: clears a half-done restore, then writes the archived session back. */
  async #restoreHeld(interrupted: boolean): Promise<RestoreOutcome> {
    const session = this.#session;
    if (interrupted) await this.#clearHalfRestore();
    else if ((await this.#redis.exists(this.#log.keys(session).meta)) === 1) return "present";
    const [digest, state] = await Promise.all([this.#archive.digest(session), this.#archive.state(session)]);
    if (digest === undefined || state === undefined) return "not-archived";
    const order = orderKeys(this.#log.prefix, session);
    const conf = checkedConf(state.conf, this.#refuse);
    const registered = checkedRegistered(state.registered, this.#refuse);
    // The mark goes first: from here until it is removed, the session is a half-done restore.
    await this.#redis.hset(this.#log.keys(session).meta, RESTORING_FIELD, new Date().toISOString());
    if (Object.keys(conf).length > 0) await this.#redis.hset(order.conf, conf);
    if (Object.keys(registered).length > 0) await this.#redis.hset(order.registered, registered);
    const events = [];
    let epochFloor = 0;
    for await (const event of this.#archive.read(session)) {
      if (event.session !== session) this.#refuse(`seq ${event.seq} belongs to session ${event.session}`);
      epochFloor = Math.max(epochFloor, event.epoch);
      events.push(event);
    }
    if (!sameDigest(logDigest(events), digest))
      this.#refuse("its events do not match the digest the archive reports for them");
    const meta = restoredMeta(state, digest.lastSeq, epochFloor, this.#refuse);
    await importEnvelopes(this.#log, session, events, { source: `archive ${this.#archive.location}` });
    await this.#redis.hset(this.#log.keys(session).meta, meta);
    await this.#redis.hdel(this.#log.keys(session).meta, RESTORING_FIELD);
    return "restored";
  }

  /** A restorer died half-way (its mark is there, its lock expired): what it wrote goes, the restore starts over. */
  async #clearHalfRestore(): Promise<void> {
    const order = orderKeys(this.#log.prefix, this.#session);
    await this.#log.destroy(this.#session);
    await this.#redis.del(order.conf, order.registered);
  }
}

/**
 * Writes an archived session back into Redis when Redis does not hold it. "present": Redis has it (or
 * another restorer just wrote it); "not-archived": the archive has no such session, nothing written.
 */
export function restoreSession(
  log: EventLog,
  redis: RedisClient,
  archive: Archive,
  session: string,
): Promise<RestoreOutcome> {
  return new SessionRestore(log, redis, archive, session).run();
}

/** The producer's `restore` option: each enqueue first brings its session back from the archive when Redis lost it. */
export function archiveRestorer(
  log: EventLog,
  redis: RedisClient,
  archive: Archive,
): (session: string) => Promise<RestoreOutcome> {
  return (session) => restoreSession(log, redis, archive, session);
}
