// What the fleet charts are computed from: a few figures per turn of every session (when it ended and
// how, what it cost, its labels, its tool calls and how many failed), taken from the session's read
// model (or its log folded, for a short one the projector has not reached) and from the archive's copy
// for sessions retention moved out of Redis. Figures are kept per session and log position, so asking
// again reads only the sessions that moved since: a fleet of thousands of sessions costs one index
// read and one small field per session, not every transcript each time.
import { LRUCache } from "lru-cache";
import type { Archive } from "../archive/index.ts";
import { forTerminal, silentLogger, type Logger } from "../kernel/index.ts";
import { indexKey, isCluster, type EventLog, type RedisClient } from "../log/index.ts";
import {
  applyEvent,
  FOLD_LIMIT,
  foldAsync,
  initialState,
  readModel,
  type ProjectionState,
  type TranscriptItem,
} from "../projector/index.ts";
import { isTenantName } from "../tenants/index.ts";

/** One turn as the charts count it. Times are milliseconds since the epoch. */
export interface TurnFact {
  status: string;
  /** When it ended; null while it runs, waits or is parked. */
  endedMs: number | null;
  /** When its first attempt started (else when it was queued). */
  startedMs: number | null;
  /** The moment that places it in a window: its end, else its start, else when it was queued. */
  atMs: number | null;
  /** Set when it failed: its error kind. */
  errorKind: string | null;
  /** Every attempt's cost, abandoned ones included (they were paid for). */
  costUsd: number;
  labels: Record<string, string>;
  /** Tool name → [calls that got a result, of them errors]. */
  tools: Record<string, [number, number]>;
}

export interface SessionFacts {
  session: string;
  /** The log position these figures are of (for an archived session, its archived last seq). */
  seq: number;
  tenant: string | null;
  archived: boolean;
  turns: TurnFact[];
}

const msOf = (iso: string | null): number | null => {
  if (iso === null) return null;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms;
};

/** Tool calls that got a result, and those whose result was an error, subagent work included. */
function countTools(items: readonly TranscriptItem[], into: Record<string, [number, number]>): void {
  for (const item of items) {
    if (item.t !== "tool") continue;
    if (item.result !== null) {
      // A tool's name is the model's text: shown escaped, like every other text of a log.
      const counts = (into[forTerminal(item.name || "(unnamed)")] ??= [0, 0]);
      counts[0]++;
      if (item.result.isError) counts[1]++;
    }
    countTools(item.subagent, into);
  }
}

/** The charts' figures of a folded session. */
export function factsOf(session: string, state: ProjectionState, archived: boolean): SessionFacts {
  const view = state.view;
  const turns = view.turns.map((turn, index): TurnFact => {
    const tools: Record<string, [number, number]> = {};
    for (const attempt of state.transcript.turns[index]?.attempts ?? []) countTools(attempt.items, tools);
    const endedMs = ["finished", "failed", "cancelled"].includes(turn.status) ? msOf(turn.endedAt) : null;
    const startedMs = msOf(turn.startedAt) ?? msOf(turn.queuedAt);
    return {
      status: turn.status,
      endedMs,
      startedMs,
      atMs: endedMs ?? startedMs,
      errorKind: turn.status === "failed" ? forTerminal(turn.errorKind ?? "unknown") : null,
      costUsd: turn.attempts.reduce((sum, attempt) => sum + attempt.costUsd, 0),
      labels: turn.labels ?? {},
      tools,
    };
  });
  // A stored state is a Redis writer's text: a tenant that is not a tenant name is not shown as one.
  const tenant = typeof view.tenant === "string" && isTenantName(view.tenant) ? view.tenant : null;
  return { session, seq: state.lastSeq, tenant, archived, turns };
}

export interface FleetFactsOptions {
  log: EventLog;
  redis: RedisClient;
  archive?: Archive | undefined;
  logger?: Logger | undefined;
}

export interface FactsRead {
  sessions: SessionFacts[];
  /** Sessions in Redis whose log is too long to fold and that have no read model yet. */
  unread: number;
  /** More archived sessions were active in the window than the charts read (ARCHIVED_CHARTED). */
  archivedCapped: boolean;
}

/** Sessions whose figures are read at once (each a read model, or a log folded). */
const READ_CONCURRENCY = 32;
/** Most archived sessions the charts read, the most recently active first. */
export const ARCHIVED_CHARTED = 2000;
/** Sessions whose figures are kept between asks. */
const KEPT_SESSIONS = 100_000;

export class FleetFacts {
  readonly #o: FleetFactsOptions;
  readonly #logger: Logger;
  readonly #kept = new LRUCache<string, SessionFacts>({ max: KEPT_SESSIONS });

  constructor(options: FleetFactsOptions) {
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
  }

  /** Every session's figures, as of now: Redis's, then the archived ones last active at or after `sinceMs`. */
  async read(sinceMs: number): Promise<FactsRead> {
    const { log } = this.#o;
    const ids = await this.#o.redis.zrange(indexKey(log.prefix), 0, -1);
    const seqs = await this.#lastSeqs(ids);
    const stale: Array<{ session: string; seq: number }> = [];
    const sessions: SessionFacts[] = [];
    ids.forEach((session, index) => {
      const seq = seqs[index]!;
      if (seq === null) return; // gone from Redis (retention): the archive has it, if anything
      const kept = this.#kept.get(session);
      if (kept !== undefined && kept.seq === seq && !kept.archived) sessions.push(kept);
      else stale.push({ session, seq });
    });
    let unread = 0;
    for (let start = 0; start < stale.length; start += READ_CONCURRENCY) {
      const batch = stale.slice(start, start + READ_CONCURRENCY);
      for (const facts of await Promise.all(batch.map(({ session, seq }) => this.#liveFacts(session, seq)))) {
        if (facts === undefined) unread++;
        else sessions.push(facts);
      }
    }
    const archived = await this.#archivedFacts(new Set(ids), sinceMs);
    return { sessions: [...sessions, ...archived.sessions], unread, archivedCapped: archived.capped };
  }

  /** Each session's last seq from its log's meta, one small read each; null for a session gone from Redis. */
  async #lastSeqs(ids: readonly string[]): Promise<Array<number | null>> {
    const { log, redis } = this.#o;
    const keys = ids.map((id) => log.keys(id).meta);
    let values: Array<string | null>;
    if (isCluster(redis)) values = await Promise.all(keys.map((key) => redis.hget(key, "seq")));
    else {
      // One round trip for the whole index: a fleet's charts must not wait on thousands of them.
      const pipeline = redis.pipeline();
      for (const key of keys) pipeline.hget(key, "seq");
      values = ((await pipeline.exec()) ?? []).map(([err, value]) => (err ? null : (value as string | null)));
    }
    return values.map((value) => (value === null ? null : Number(value)));
  }

  /**
   * A session's figures up to `seq`: its read model and the events after it, else (no read model) its
   * log folded when short enough; undefined for a long log without a read model (left to the projector).
   */
  async #liveFacts(session: string, seq: number): Promise<SessionFacts | undefined> {
    const { log, redis } = this.#o;
    let state: ProjectionState | undefined = (await readModel(redis, session, { prefix: log.prefix }))?.state;
    if (state === undefined && seq > FOLD_LIMIT) return undefined;
    state ??= initialState();
    // A projector far behind: its read model is what there is, rather than folding a long tail here.
    if (seq - state.lastSeq <= FOLD_LIMIT)
      for await (const env of log.read(session, { fromSeq: state.lastSeq + 1, toSeq: seq })) applyEvent(state, env);
    const facts = { ...factsOf(session, state, false), seq };
    this.#kept.set(session, facts);
    return facts;
  }

  /**
   * Archived sessions Redis no longer holds that were last active at or after `sinceMs`, at most
   * ARCHIVED_CHARTED of them: an archived copy never changes, so each is read once and kept.
   */
  async #archivedFacts(
    inRedis: ReadonlySet<string>,
    sinceMs: number,
  ): Promise<{ sessions: SessionFacts[]; capped: boolean }> {
    const archive = this.#o.archive;
    if (archive === undefined) return { sessions: [], capped: false };
    let listed;
    try {
      listed = await archive.summaries({
        limit: ARCHIVED_CHARTED + 1,
        onCorrupt: (err) =>
          this.#logger.warn({ err: err.message }, "dashboard: archived summary left out of the charts"),
      });
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, "dashboard: archived sessions not charted");
      return { sessions: [], capped: false };
    }
    const inWindow = listed
      .map(({ summary }) => summary)
      .filter((summary) => !inRedis.has(summary.session) && (msOf(summary.lastAt) ?? 0) >= sinceMs);
    const sessions: SessionFacts[] = [];
    const charted = inWindow.slice(0, ARCHIVED_CHARTED);
    for (let start = 0; start < charted.length; start += READ_CONCURRENCY) {
      const batch = charted.slice(start, start + READ_CONCURRENCY);
      sessions.push(
        ...(await Promise.all(
          batch.map(async ({ session, lastSeq }) => {
            const key = `archived:${session}`;
            const kept = this.#kept.get(key);
            if (kept !== undefined && kept.seq === lastSeq) return kept;
            const facts = factsOf(session, await foldAsync(archive.read(session)), true);
            this.#kept.set(key, facts);
            return facts;
          }),
        )),
      );
    }
    return { sessions, capped: inWindow.length > charted.length };
  }
}
