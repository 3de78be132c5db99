// The fleet as the console shows it: every session's line, the decisions waiting for an operator,
// the queue, the tenants' limits and spend, the model credentials the gateways hold requests for
// (cooldowns). Live changes come from the log itself: one blocking XREAD over every known session's
// stream (the session index is re-read every few seconds to learn new sessions), so nothing asks each
// session in turn whether it changed. A session that moved is folded forward in memory from its read
// model (or from zero), so its line is right even before the projector commits.
import type { Queue } from "bullmq";
import { LRUCache } from "lru-cache";
import { archivedRow, type Archive } from "../archive/index.ts";
import { listPending, readParkedEntries, type OperatorKeyring, type PendingRequest } from "../decisions/index.ts";
import { listCooldowns, type CooldownEntry } from "../gateway/index.ts";
import { backoffDelayMs, forTerminal, silentLogger, type Logger } from "../kernel/index.ts";
import { isCluster, storedEnvelope, storedHead, type EventLog, type RedisClient } from "../log/index.ts";
import {
  applyEvent,
  FOLD_LIMIT,
  inBatches,
  initialState,
  LISTING_CONCURRENCY,
  listingRow,
  readModel,
  sessionRow,
  sessionRowOf,
  type ProjectionState,
  type SessionRow,
} from "../projector/index.ts";
import { tenantRows, type TenantRow } from "../tenants/index.ts";
import { contextOf, type RequestContext } from "./context.ts";
import { queueView, type QueueView } from "./queue-view.ts";

/** A session's line in the console; `archived` marks one retention moved out of Redis (read from its summary). */
export type FleetRow = SessionRow & { archived?: true };

export type FleetEvent =
  | { type: "row"; row: FleetRow }
  | { type: "pending"; pending: PendingView[] }
  | { type: "queue"; queue: QueueView }
  | { type: "tenants"; tenants: TenantRow[] }
  | { type: "cooldowns"; cooldowns: CooldownEntry[] };

export interface PendingView extends PendingRequest {
  context: RequestContext | null;
}

/**
 * A pending request as the inbox shows it: every text a model or a Redis writer chose, with controls,
 * bidi and invisible characters escaped (a page shown with textContent still obeys bidi overrides).
 */
function shownPending(request: PendingRequest): PendingRequest {
  const line = (text: string): string => forTerminal(text);
  const block = (text: string): string => forTerminal(text, { multiline: true });
  const description = request.description === undefined ? undefined : line(request.description);
  return {
    ...request,
    tool: line(request.tool),
    input: block(request.input),
    command: request.command === undefined ? undefined : block(request.command),
    description,
  };
}

/**
 * A line as the page shows it: every text escaped as a pending request's is (a Redis writer, or
 * whoever edited an archived summary, chose them). Numbers are numbers: the summary's check saw to it.
 */
function shownRow(row: FleetRow): FleetRow {
  const line = (text: string | null): string | null => (text === null ? null : forTerminal(text));
  return {
    ...row,
    session: forTerminal(row.session),
    status: forTerminal(row.status),
    lastActivity: line(row.lastActivity),
    lastErrorKind: line(row.lastErrorKind),
    // A read model's cwd is whatever a producer queued (or a Redis writer wrote).
    cwd: line(row.cwd ?? null),
  };
}

export interface FleetOptions {
  log: EventLog;
  redis: RedisClient;
  /** Where retention moved ended sessions: the ARCHIVED_ROWS most recent are listed after the live ones. */
  archive?: Archive | undefined;
  queue: Queue | undefined;
  /** The operator keys tenants' limits are checked against (the workers'); none: shown unchecked. */
  trustedKeys?: OperatorKeyring | undefined;
  logger?: Logger | undefined;
  /** How often the session index is re-read for new sessions; default 2000 ms. */
  rescanMs?: number;
}

const BLOCK_MS = 1000;
/** Archived sessions the list shows, most recently active first: older ones still open by their URL. */
export const ARCHIVED_ROWS = 500;
/** Folded states kept for sessions that moved lately (the least recently moved go first). */
const MAX_STATES = 200;
const KINDS_FOR_PENDING = /^(decision\.|attempt\.|turn\.|rule\.)/;
const KINDS_FOR_QUEUE = /^(attempt\.|turn\.)/;
// A model call ends after the upstream answered it: a 429 that began a cooldown, or a probe's answer.
// Cooldowns are not in the log, so they are also read again with every rescan of the session index
// (a session found late had its calls before the watch knew it), and sent only when they changed.
const KINDS_FOR_COOLDOWNS = /^model\.call$/;
/**
 * Kinds after which the pending index changes without a further event: a worker marks the request of
 * a turn that parked right after its turn.parked, and `decide` marks a parked request decided after
 * its decision.made. The decisions and the queue are read again every SETTLE_EVERY_MS for SETTLE_MS.
 */
const KINDS_SETTLING: ReadonlySet<string> = new Set(["turn.parked", "decision.made"]);
const SETTLE_MS = 5000;
const SETTLE_EVERY_MS = 1000;
/**
 * Tenants are read again after events (a model call's cost, a turn taking or freeing a slot), at most
 * this often: each read costs two commands per tenant, and a busy fleet writes events all the time.
 */
const TENANTS_EVERY_MS = 2000;

export class Fleet {
  readonly #o: FleetOptions;
  readonly #logger: Logger;
  readonly #listeners = new Set<(event: FleetEvent) => void>();
  readonly #states = new LRUCache<string, ProjectionState>({ max: MAX_STATES });
  readonly #lastIds = new Map<string, string>();
  #ac: AbortController | undefined;
  #dirty = new Set<string>();
  #pendingDirty = false;
  #queueDirty = false;
  #cooldownsDirty = false;
  /** What the cooldowns last sent were (their times left aside), so an unchanged reading is not sent again. */
  #cooldownsSent = "";
  #flushTimer: NodeJS.Timeout | undefined;
  #settleTimer: NodeJS.Timeout | undefined;
  #settleUntil = 0;
  #tenantsDirty = false;
  #tenantsReadAt = 0;
  #tenantsTimer: NodeJS.Timeout | undefined;
  #loop: Promise<void> | undefined;

  constructor(options: FleetOptions) {
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
  }

  /** Listens to fleet changes; the watch runs while anyone listens. */
  subscribe(fn: (event: FleetEvent) => void): () => void {
    this.#listeners.add(fn);
    if (this.#listeners.size === 1) this.#start();
    return () => {
      this.#listeners.delete(fn);
      if (this.#listeners.size === 0) void this.stop();
    };
  }

  async stop(): Promise<void> {
    this.#ac?.abort();
    clearTimeout(this.#flushTimer);
    clearInterval(this.#settleTimer);
    this.#settleTimer = undefined;
    clearTimeout(this.#tenantsTimer);
    this.#tenantsTimer = undefined;
    await this.#loop;
    this.#loop = undefined;
  }

  /** A session's state folded up to the end of its log: its read model, then the events after it. */
  async state(session: string): Promise<ProjectionState> {
    let projection = this.#states.peek(session);
    if (projection === undefined)
      projection = (await readModel(this.#o.redis, session, { prefix: this.#o.log.prefix }))?.state ?? initialState();
    for await (const env of this.#o.log.read(session, { fromSeq: projection.lastSeq + 1 })) applyEvent(projection, env);
    this.#states.set(session, projection);
    return projection;
  }

  /** Every session of Redis's index, then the most recent archived ones it no longer holds. */
  async rows(): Promise<FleetRow[]> {
    const ids = await this.#o.log.sessions();
    const live = await inBatches(ids, LISTING_CONCURRENCY, (id) => this.#row(id));
    const archived = await this.#archivedRows(new Set(ids));
    return [...live, ...archived].map(shownRow);
  }

  /**
   * From the archive's summaries (no copy is read). An edited summary is left out and logged; an
   * archive that cannot answer leaves the list to the live sessions rather than failing it.
   */
  async #archivedRows(inRedis: ReadonlySet<string>): Promise<FleetRow[]> {
    const archive = this.#o.archive;
    if (archive === undefined) return [];
    try {
      const listed = await archive.summaries({
        limit: ARCHIVED_ROWS,
        onCorrupt: (err) => this.#logger.warn({ err: err.message }, "dashboard: archived summary left out"),
      });
      return listed
        .filter(({ summary }) => !inRedis.has(summary.session))
        .map(({ summary }) => ({ ...archivedRow(summary), archived: true as const }));
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, "dashboard: archived sessions not listed");
      return [];
    }
  }

  /** From the folded state when there is one; else the read model's; else, for a short log, folded now (and kept). */
  async #row(session: string): Promise<SessionRow> {
    const projection = this.#states.peek(session);
    if (projection !== undefined) return sessionRowOf(session, projection, (await this.#o.log.stat(session)).lastSeq);
    return (await listingRow(this.#o.redis, this.#o.log, session, FOLD_LIMIT, () => this.state(session))).row;
  }

  /**
   * Whether folding a session forward is cheap: folded already, projected, or a short log; when not, the row read to
   * tell.
   */
  async #foldable(session: string): Promise<{ foldable: true } | { foldable: false; row: SessionRow }> {
    if (this.#states.has(session)) return { foldable: true };
    const row = await sessionRow(this.#o.redis, this.#o.log, session);
    return row.projectedSeq !== null || row.lastSeq <= FOLD_LIMIT ? { foldable: true } : { foldable: false, row };
  }

  async pending(): Promise<PendingView[]> {
    const list = await listPending({ redis: this.#o.redis, prefix: this.#o.log.prefix });
    // Several requests may wait in one session: its state is folded once for all of them.
    const states = new Map<string, Promise<ProjectionState | undefined>>();
    const stateOf = (session: string): Promise<ProjectionState | undefined> => {
      let folding = states.get(session);
      if (folding === undefined)
        states.set(
          session,
          (folding = this.#foldable(session).then(({ foldable }) => (foldable ? this.state(session) : undefined))),
        );
      return folding;
    };
    const context = async (request: PendingRequest): Promise<RequestContext | null> => {
      const projection = await stateOf(request.session);
      return projection === undefined ? null : contextOf(projection, request.turn);
    };
    return Promise.all(list.map(async (p) => ({ ...shownPending(p), context: await context(p) })));
  }

  /** The queue; a parked turn's job (delayed until its deadline, or woken by a decision) shows as parked. */
  async queue(): Promise<QueueView> {
    if (this.#o.queue === undefined) return queueView(undefined);
    const parked = await readParkedEntries(this.#o.redis, this.#o.log.prefix);
    return queueView(this.#o.queue, new Set(parked.map((entry) => entry.turn)));
  }

  /**
   * Every tenant seen or with limits, as `turnstream tenants` lists them; texts escaped as the inbox's
   * are (tenant names and records come from Redis), scrubbed on the way out like everything sent.
   */
  async tenants(): Promise<TenantRow[]> {
    return tenantRows({
      redis: this.#o.redis,
      logPrefix: this.#o.log.prefix,
      keyring: this.#o.trustedKeys,
      show: (text) => forTerminal(text),
    });
  }

  /** Sends the tenants again at once: their limits were just set or cleared. */
  refreshTenants(): void {
    this.#tenantsDirty = true;
    this.#tenantsReadAt = 0;
    this.#scheduleFlush();
  }

  /** The credentials cooling down now; a fingerprint is a digest, and whatever Redis held is escaped. */
  async cooldowns(): Promise<CooldownEntry[]> {
    const entries = await listCooldowns(this.#o.redis, this.#o.log.prefix);
    return entries.map((entry) => ({ ...entry, fingerprint: forTerminal(entry.fingerprint) }));
  }

  #start(): void {
    this.#ac = new AbortController();
    if (isCluster(this.#o.redis)) {
      // One blocking read cannot span a cluster's slots: the fleet views show what they loaded.
      this.#logger.warn(
        {},
        "dashboard: on a Redis Cluster the sessions, decisions and queue views do not update live; reload them",
      );
      return;
    }
    this.#loop = this.#watch(this.#ac.signal).catch((err: unknown) => {
      this.#logger.warn({ err: (err as Error).message }, "dashboard: fleet watch stopped");
    });
  }

  /** Learns sessions from the index; those that appear after the first scan are news to the page. */
  async #rescan(first: boolean): Promise<void> {
    for (const session of await this.#o.log.sessions()) {
      if (this.#lastIds.has(session)) continue;
      this.#lastIds.set(session, `0-${(await this.#o.log.stat(session)).lastSeq}`);
      if (!first) this.#changed(session, "session.new");
    }
  }

  async #watch(signal: AbortSignal): Promise<void> {
    const conn = this.#o.redis.duplicate();
    conn.on("error", () => {});
    signal.addEventListener("abort", () => conn.disconnect(), { once: true });
    let rescanned = 0;
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (Date.now() - rescanned >= (this.#o.rescanMs ?? 2000)) {
          await this.#rescan(rescanned === 0);
          rescanned = Date.now();
          this.#cooldownsDirty = true;
          this.#scheduleFlush();
        }
        await this.#readOnce(conn, signal);
        failures = 0;
      } catch (err) {
        if (signal.aborted) break;
        // Said once per outage; retried ever more slowly, up to every 30 s.
        if (failures++ === 0)
          this.#logger.warn({ err: (err as Error).message }, "dashboard: fleet watch read failed; retrying");
        await new Promise((r) => setTimeout(r, backoffDelayMs(failures + 1, { baseMs: 500, maxMs: 30_000 })));
      }
    }
  }

  async #readOnce(conn: RedisClient, signal: AbortSignal): Promise<void> {
    const sessions = [...this.#lastIds.keys()];
    if (sessions.length === 0) {
      await new Promise((r) => setTimeout(r, BLOCK_MS));
      return;
    }
    const keys = sessions.map((s) => this.#o.log.keys(s).events);
    const ids = sessions.map((s) => this.#lastIds.get(s)!);
    const reply = (await conn.xread("COUNT", 1000, "BLOCK", BLOCK_MS, "STREAMS", ...keys, ...ids)) as Array<
      [string, Array<[string, string[]]>]
    > | null;
    if (reply === null || signal.aborted) return;
    for (const [key, entries] of reply) {
      const session = sessions[keys.indexOf(key)];
      if (session === undefined || entries.length === 0) continue;
      this.#lastIds.set(session, entries.at(-1)![0]);
      for (const [, fields] of entries) this.#changed(session, storedHead(storedEnvelope(fields))?.kind ?? "");
    }
  }

  #changed(session: string, kind: string): void {
    this.#dirty.add(session);
    if (kind === "session.new" || KINDS_FOR_PENDING.test(kind)) this.#pendingDirty = true;
    if (kind === "session.new" || KINDS_FOR_QUEUE.test(kind)) this.#queueDirty = true;
    if (KINDS_FOR_COOLDOWNS.test(kind)) this.#cooldownsDirty = true;
    if (KINDS_SETTLING.has(kind)) this.#settle();
    this.#tenantsDirty = true;
    this.#scheduleFlush();
  }

  /** Whether the tenants are to be read in this flush; when they changed too recently, a later flush is set up. */
  #tenantsDue(): boolean {
    if (!this.#tenantsDirty) return false;
    const wait = this.#tenantsReadAt + TENANTS_EVERY_MS - Date.now();
    if (wait <= 0) {
      this.#tenantsDirty = false;
      this.#tenantsReadAt = Date.now();
      return true;
    }
    this.#tenantsTimer ??= setTimeout(() => {
      this.#tenantsTimer = undefined;
      this.#scheduleFlush();
    }, wait);
    return false;
  }

  /** Changes that come together go out together, a moment later. */
  #scheduleFlush(): void {
    this.#flushTimer ??= setTimeout(() => void this.#flush(), 30);
  }

  /** Reads the decisions and the queue again now and then for a while (see KINDS_SETTLING). */
  #settle(): void {
    this.#settleUntil = Date.now() + SETTLE_MS;
    this.#settleTimer ??= setInterval(() => {
      this.#pendingDirty = this.#queueDirty = true;
      this.#scheduleFlush();
      if (Date.now() < this.#settleUntil) return;
      clearInterval(this.#settleTimer);
      this.#settleTimer = undefined;
    }, SETTLE_EVERY_MS);
  }

  async #flush(): Promise<void> {
    this.#flushTimer = undefined;
    const dirty = [...this.#dirty];
    const [pending, queue, tenants, cooldowns] = [
      this.#pendingDirty,
      this.#queueDirty,
      this.#tenantsDue(),
      this.#cooldownsDirty,
    ];
    this.#dirty = new Set();
    this.#pendingDirty = this.#queueDirty = this.#cooldownsDirty = false;
    try {
      for (const session of dirty) {
        const check = await this.#foldable(session);
        if (check.foldable) await this.state(session);
        // Folded, its row comes from the state; not, it is the row just read.
        this.#emit({ type: "row", row: shownRow(check.foldable ? await this.#row(session) : check.row) });
      }
      if (pending) this.#emit({ type: "pending", pending: await this.pending() });
      if (queue) this.#emit({ type: "queue", queue: await this.queue() });
      if (tenants) this.#emit({ type: "tenants", tenants: await this.tenants() });
      if (cooldowns) await this.#emitCooldowns();
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, "dashboard: fleet update failed");
    }
  }

  async #emitCooldowns(): Promise<void> {
    const cooldowns = await this.cooldowns();
    const sent = JSON.stringify(cooldowns.map(({ remainingMs: _left, ...rest }) => rest));
    if (sent === this.#cooldownsSent) return;
    this.#cooldownsSent = sent;
    this.#emit({ type: "cooldowns", cooldowns });
  }

  #emit(event: FleetEvent): void {
    for (const fn of this.#listeners) fn(event);
  }
}
