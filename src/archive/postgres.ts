// The archive in PostgreSQL, for a fleet: one row per session (its summary, digest and state), the
// events as the exact JSON text the log gave (so a read is byte for byte), and rows derived from them
// for fleet questions (tool calls, decisions). A put is one transaction; the schema is versioned and
// migrated under an advisory lock, so processes starting together migrate once.
import pg from "pg";
import type { PoolClient } from "pg";
import { forTerminal } from "../kernel/index.ts";
import { assertSessionId, IMPORTED_FIELD, type Envelope } from "../log/index.ts";
import { TENANT_NAME_PATTERN } from "../tenants/index.ts";
import type {
  Archive,
  ArchivedListing,
  ArchivedRecord,
  ArchivedSummary,
  ArchiveReadOptions,
  ArchiveSummariesOptions,
  LogDigest,
  SessionCopy,
  SessionState,
} from "./archive.ts";
import {
  archivedSummarySchema,
  checkSummaryEnd,
  copyLines,
  sessionStateSchema,
  storedValue,
  StoredLines,
} from "./check.ts";
import { decisionRows, timestampOf, toolCallRows } from "./derive.ts";
import { claimedSeq, describeDigest, DigestBuilder, putWrites, sameDigest } from "./digest.ts";
import { ArchiveCorruptError, InvalidArchiveUrlError } from "./errors.ts";
import { listingBounds } from "./listing.ts";

export const DEFAULT_SCHEMA = "public";
const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;
/** Rows per statement when writing and per page when reading. */
const PAGE_ROWS = 1000;
/** The advisory-lock class of turnstream's locks (the second key is the schema's or session's hash). */
const LOCK_CLASS = 0x7473; // "ts"
/** TENANT_NAME_PATTERN as a PostgreSQL regular expression (the same characters, no flags). */
const TENANT_PATTERN_SQL = TENANT_NAME_PATTERN.source;

interface Migration {
  id: number;
  name: string;
  statements: (schema: string) => string[];
}

const MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: "sessions, events, tool calls and decisions",
    statements: (schema) => [
      `CREATE TABLE ${schema}.turnstream_sessions (
        session text PRIMARY KEY,
        status text NOT NULL,
        turns integer NOT NULL,
        attempts integer NOT NULL,
        cost_usd numeric NOT NULL,
        tokens_input bigint NOT NULL,
        tokens_output bigint NOT NULL,
        tokens_cache_read bigint NOT NULL,
        tokens_cache_creation bigint NOT NULL,
        model text,
        cwd text,
        labels jsonb NOT NULL DEFAULT '{}',
        first_at timestamptz,
        last_at timestamptz,
        last_seq bigint NOT NULL,
        error_kinds jsonb NOT NULL DEFAULT '{}',
        decisions jsonb NOT NULL,
        archived boolean NOT NULL DEFAULT false,
        digest_count bigint,
        digest_last_seq bigint,
        digest_sha256 text,
        state jsonb,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE INDEX turnstream_sessions_last_at ON ${schema}.turnstream_sessions (last_at)`,
      `CREATE INDEX turnstream_sessions_status ON ${schema}.turnstream_sessions (status)`,
      `CREATE TABLE ${schema}.turnstream_events (
        session text NOT NULL REFERENCES ${schema}.turnstream_sessions (session) ON DELETE CASCADE,
        seq bigint NOT NULL,
        kind text NOT NULL,
        turn text NOT NULL,
        attempt integer NOT NULL,
        at timestamptz,
        envelope text NOT NULL,
        PRIMARY KEY (session, seq)
      )`,
      `CREATE TABLE ${schema}.turnstream_tool_calls (
        session text NOT NULL REFERENCES ${schema}.turnstream_sessions (session) ON DELETE CASCADE,
        turn text NOT NULL,
        attempt integer NOT NULL,
        tool_use_id text NOT NULL,
        name text NOT NULL,
        started_at timestamptz,
        ended_at timestamptz,
        is_error boolean,
        PRIMARY KEY (session, turn, attempt, tool_use_id)
      )`,
      `CREATE INDEX turnstream_tool_calls_name ON ${schema}.turnstream_tool_calls (name)`,
      `CREATE TABLE ${schema}.turnstream_decisions (
        session text NOT NULL REFERENCES ${schema}.turnstream_sessions (session) ON DELETE CASCADE,
        seq bigint NOT NULL,
        request_id text NOT NULL,
        turn text NOT NULL,
        tool text,
        decision text NOT NULL,
        decided_by text NOT NULL,
        source text NOT NULL,
        reason text NOT NULL,
        at timestamptz,
        PRIMARY KEY (session, seq)
      )`,
    ],
  },
  {
    id: 2,
    name: "events by kind and time",
    // Fleet questions over one kind of event (failed turns by week) would otherwise read every
    // envelope of every session; IF NOT EXISTS keeps a hand-made index of this name from failing it.
    statements: (schema) => [
      `CREATE INDEX IF NOT EXISTS turnstream_events_kind_at ON ${schema}.turnstream_events (kind, at)`,
    ],
  },
  {
    id: 3,
    name: "last error kind; archived sessions by last activity",
    // A listing of archived sessions, newest first, reads this index in order and stops at its limit.
    // Ties go by id in code-point order (COLLATE "C"), as the file store sorts them.
    statements: (schema) => [
      `ALTER TABLE ${schema}.turnstream_sessions ADD COLUMN IF NOT EXISTS last_error_kind text`,
      `CREATE INDEX IF NOT EXISTS turnstream_sessions_archived_recent ON ${schema}.turnstream_sessions
        (last_at DESC NULLS LAST, session COLLATE "C") WHERE archived`,
    ],
  },
  {
    id: 4,
    name: "tenant of each session",
    // Rows stored before get the tenant their first turn.queued names, when it is a tenant name (the
    // pattern is TENANT_NAME_PATTERN's), as the projector reads it. A listing of one tenant's archived
    // sessions, newest first, reads the second index in order.
    statements: (schema) => [
      `ALTER TABLE ${schema}.turnstream_sessions ADD COLUMN IF NOT EXISTS tenant text`,
      `UPDATE ${schema}.turnstream_sessions s SET tenant = (
        SELECT e.envelope::jsonb -> 'data' ->> 'tenant' FROM ${schema}.turnstream_events e
          WHERE e.session = s.session AND e.kind = 'turn.queued'
            AND e.envelope::jsonb -> 'data' ->> 'tenant' ~ '${TENANT_PATTERN_SQL}'
          ORDER BY e.seq LIMIT 1)
        WHERE s.tenant IS NULL AND s.archived`,
      `CREATE INDEX IF NOT EXISTS turnstream_sessions_tenant ON ${schema}.turnstream_sessions (tenant)`,
      `CREATE INDEX IF NOT EXISTS turnstream_sessions_tenant_archived_recent ON ${schema}.turnstream_sessions
        (tenant, last_at DESC NULLS LAST, session COLLATE "C") WHERE archived`,
    ],
  },
];

/** The columns a summary is read from (summaryOfRow). */
const SUMMARY_COLUMNS = `session, status, turns, attempts, cost_usd, tokens_input, tokens_output, tokens_cache_read,
  tokens_cache_creation, model, cwd, labels, first_at, last_at, last_seq, error_kinds, decisions, last_error_kind,
  tenant`;

export interface PostgresArchiveOptions {
  /** A postgres:// URL without the `schema` parameter (openArchive takes it off). */
  connectionString: string;
  /** The schema the tables live in; default `public`. */
  schema?: string | undefined;
  /** What `location` shows (no password). */
  location?: string | undefined;
  /** Most connections held at once; default 4. */
  maxConnections?: number | undefined;
  /**
   * Runs inside a put's transaction after every row is written, before COMMIT, with the backend's
   * pid. For fault injection: a connection killed here is a put that failed at that step.
   */
  beforeCommit?: ((backendPid: number) => Promise<void> | void) | undefined;
}

interface SessionRow {
  session: string;
  status: string;
  turns: number;
  attempts: number;
  cost_usd: string;
  tokens_input: string;
  tokens_output: string;
  tokens_cache_read: string;
  tokens_cache_creation: string;
  model: string | null;
  cwd: string | null;
  labels: unknown;
  first_at: Date | null;
  last_at: Date | null;
  last_seq: string;
  error_kinds: unknown;
  decisions: unknown;
  last_error_kind: string | null;
  tenant: string | null;
  archived: boolean;
  digest_count: string | null;
  digest_last_seq: string | null;
  digest_sha256: string | null;
  state: unknown;
}

type RecordedDigestColumns = Pick<SessionRow, "digest_count" | "digest_last_seq" | "digest_sha256">;

/** What a summary's end is checked against: where the summary says it ends and the digest the put recorded. */
type SummaryEndColumns = RecordedDigestColumns & Pick<SessionRow, "last_seq" | "archived">;

/**
 * A row of a read: the session's summary end and recorded digest with one of its events (none for a
 * copy without events).
 */
interface StoredEventRow extends SummaryEndColumns {
  seq: string | null;
  envelope: string | null;
}

export class PostgresArchive implements Archive {
  readonly location: string;
  readonly schema: string;
  readonly #pool: pg.Pool;
  readonly #quoted: string;
  readonly #beforeCommit: PostgresArchiveOptions["beforeCommit"];

  constructor(options: PostgresArchiveOptions) {
    this.schema = options.schema ?? DEFAULT_SCHEMA;
    this.location = options.location ?? "postgres";
    if (!SCHEMA_PATTERN.test(this.schema))
      throw new InvalidArchiveUrlError(
        this.location,
        `schema ${JSON.stringify(this.schema)} is not a plain lowercase name`,
      );
    this.#quoted = `"${this.schema}"`;
    this.#beforeCommit = options.beforeCommit;
    this.#pool = new pg.Pool({ connectionString: options.connectionString, max: options.maxConnections ?? 4 });
    // An idle connection whose server went away: the pool drops it and the next query opens another.
    this.#pool.on("error", () => undefined);
  }

  async migrate(): Promise<{ applied: string[] }> {
    return this.#transaction(async (client) => {
      await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [LOCK_CLASS, `migrate:${this.schema}`]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.#quoted}`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.#table("migrations")} (
          id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const done = await client.query<{ id: number }>(`SELECT id FROM ${this.#table("migrations")}`);
      const have = new Set(done.rows.map((row) => row.id));
      const applied: string[] = [];
      for (const migration of MIGRATIONS) {
        if (have.has(migration.id)) continue;
        for (const statement of migration.statements(this.#quoted)) await client.query(statement);
        await client.query(`INSERT INTO ${this.#table("migrations")} (id, name) VALUES ($1, $2)`, [
          migration.id,
          migration.name,
        ]);
        applied.push(`${migration.id} ${migration.name}`);
      }
      return applied;
    }).then((applied) => ({ applied }));
  }

  async put(copy: SessionCopy): Promise<void> {
    const lines = copyLines(copy);
    const session = copy.session;
    await this.#transaction(async (client) => {
      // Puts of one session queue here, so the stored copy cannot change between the check and the write.
      await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [
        LOCK_CLASS,
        `put:${this.schema}:${session}`,
      ]);
      if (!putWrites(await this.#digestWith(client, session), copy)) return;
      await this.#writeSummary(client, copy.summary, { state: copy.state, digest: copy.digest });
      for (const table of ["events", "tool_calls", "decisions"])
        await client.query(`DELETE FROM ${this.#table(table)} WHERE session = $1`, [session]);
      await this.#insertEvents(client, copy.events, lines);
      await this.#insertToolCalls(client, session, copy.events);
      await this.#insertDecisions(client, session, copy.events);
      if (this.#beforeCommit !== undefined) {
        const pid = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
        await this.#beforeCommit(pid.rows[0]!.pid);
      }
    });
  }

  async digest(session: string): Promise<LogDigest | undefined> {
    return this.#transaction((client) => this.#digestWith(client, session), "REPEATABLE READ READ ONLY");
  }

  /**
   * Nothing is handed out before the whole copy is checked: every row an envelope of this session at
   * the next seq, and all of them against the digest the put recorded. The session row and its events
   * come in one statement, so from one snapshot (a put replacing the copy meanwhile is seen entirely
   * or not at all) and in one round trip: a transaction around a row query and paged event queries
   * cost a replay more than the rows themselves. The copy is held whole, as every reader holds it.
   */
  async *read(session: string, options: ArchiveReadOptions = {}): AsyncGenerator<Envelope> {
    assertSessionId(session);
    const result = await this.#pool.query<StoredEventRow>(
      `SELECT s.last_seq, s.archived, s.digest_count, s.digest_last_seq, s.digest_sha256, e.seq, e.envelope
        FROM ${this.#table("sessions")} s LEFT JOIN ${this.#table("events")} e ON e.session = s.session
        WHERE s.session = $1 AND s.archived ORDER BY e.seq`,
      [session],
    );
    const rows = result.rows;
    if (rows.length === 0) return;
    this.#checkSummaryEnd(session, rows[0]!);
    const where = this.#where("events", session);
    const checker = new StoredLines(where, session);
    const builder = new DigestBuilder();
    const envelopes: Envelope[] = [];
    // An archived session without events is one row with no event in it.
    for (const { seq, envelope: text } of rows) {
      if (seq === null || text === null) continue;
      const envelope = checker.check(text, `seq ${seq}`);
      if (envelope.seq !== Number(seq))
        throw new ArchiveCorruptError(
          where,
          `seq ${seq}`,
          `the row's seq column says ${seq}, its envelope ${envelope.seq}`,
        );
      builder.add(text, envelope.seq);
      envelopes.push(envelope);
    }
    const found = builder.digest();
    const recorded = recordedDigest(rows[0]!);
    if (recorded === undefined || !sameDigest(found, recorded)) {
      const said = recorded === undefined ? "nothing" : describeDigest(recorded);
      throw new ArchiveCorruptError(
        where,
        undefined,
        `its events digest to ${describeDigest(found)}, the session row says ${said}`,
      );
    }
    const from = options.fromSeq ?? 1;
    const to = options.toSeq ?? Number.POSITIVE_INFINITY;
    for (const envelope of envelopes) if (envelope.seq >= from && envelope.seq <= to) yield envelope;
  }

  async state(session: string): Promise<SessionState | undefined> {
    const row = await this.#row(session);
    if (row === undefined || !row.archived) return undefined;
    return storedValue(sessionStateSchema, row.state, this.#where("sessions", session), "state");
  }

  /** The session's summary row: an archived session's, or a live one the projector keeps (upsertSummary). */
  async summary(session: string): Promise<ArchivedSummary | undefined> {
    const row = await this.#row(session);
    if (row === undefined) return undefined;
    return storedValue(archivedSummarySchema, summaryOfRow(row), this.#where("sessions", session), "summary");
  }

  async record(session: string): Promise<ArchivedRecord | undefined> {
    const row = await this.#row(session);
    if (row === undefined || !row.archived) return undefined;
    const where = this.#where("sessions", session);
    return {
      state: storedValue(sessionStateSchema, row.state, where, "state"),
      summary: storedValue(archivedSummarySchema, summaryOfRow(row), where, "summary"),
    };
  }

  /** One query along the archived-by-last-activity index; the state's meta gives only its import time. */
  async summaries(options: ArchiveSummariesOptions = {}): Promise<ArchivedListing[]> {
    const { limit, beforeMs, tenant } = listingBounds(options);
    const result = await this.#pool.query<SessionRow & { imported_at: string | null }>(
      `SELECT ${SUMMARY_COLUMNS}, state -> 'meta' ->> $3 AS imported_at FROM ${this.#table("sessions")}
        WHERE archived AND ($1::timestamptz IS NULL OR last_at < $1) AND ($4::text IS NULL OR tenant = $4)
        ORDER BY last_at DESC NULLS LAST, session COLLATE "C" LIMIT $2`,
      [beforeMs === undefined ? null : new Date(beforeMs).toISOString(), limit ?? null, IMPORTED_FIELD, tenant ?? null],
    );
    const listed: ArchivedListing[] = [];
    for (const row of result.rows) {
      try {
        // The id is checked with the rest of the row; until then it is shown escaped.
        const where = this.#where("sessions", forTerminal(String(row.session)));
        const summary = storedValue(archivedSummarySchema, summaryOfRow(row), where, "summary");
        listed.push({ summary, importedAt: row.imported_at });
      } catch (err) {
        if (!(err instanceof ArchiveCorruptError) || options.onCorrupt === undefined) throw err;
        options.onCorrupt(err);
      }
    }
    return listed;
  }

  async *sessions(): AsyncGenerator<string> {
    let after = "";
    for (;;) {
      const page = await this.#pool.query<{ session: string }>(
        `SELECT session FROM ${this.#table("sessions")} WHERE archived AND session > $1 ORDER BY session LIMIT $2`,
        [after, PAGE_ROWS],
      );
      for (const row of page.rows) yield row.session;
      if (page.rows.length < PAGE_ROWS) return;
      after = page.rows.at(-1)!.session;
    }
  }

  /**
   * Keeps a live session's row current. A row never moves back (a summary older than the row's last
   * seq is ignored), and an archived row keeps its copy: only a put changes the copy.
   */
  async upsertSummary(summary: ArchivedSummary): Promise<void> {
    await this.#withClient((client) => this.#writeSummary(client, summary, undefined));
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }

  #table(name: string): string {
    return `${this.#quoted}.turnstream_${name}`;
  }

  #where(table: string, session: string): string {
    return `${this.location} ${this.schema}.turnstream_${table} session ${session}`;
  }

  async #withClient<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#connect();
    try {
      const result = await work(client);
      this.#release(client, false);
      return result;
    } catch (err) {
      // A connection that failed mid-statement is not given back for reuse.
      this.#release(client, true);
      throw err;
    }
  }

  /**
   * A pooled connection with a listener for its socket's errors while it is out of the pool (the
   * pool listens only to idle ones): a connection lost mid-transaction fails that statement instead
   * of crashing the process.
   */
  async #connect(): Promise<PoolClient> {
    const client = await this.#pool.connect();
    client.on("error", ignoreSocketError);
    return client;
  }

  #release(client: PoolClient, broken: boolean): void {
    client.off("error", ignoreSocketError);
    client.release(broken);
  }

  async #transaction<T>(work: (client: PoolClient) => Promise<T>, mode = "READ COMMITTED"): Promise<T> {
    return this.#withClient(async (client) => {
      await client.query(`BEGIN ISOLATION LEVEL ${mode}`);
      try {
        const result = await work(client);
        await client.query("COMMIT");
        return result;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw err;
      }
    });
  }

  async #row(session: string): Promise<SessionRow | undefined> {
    // Refused by name like the file store does, not merely looked up: a caller handing a crafted id
    // learns it is not an id instead of "not archived".
    assertSessionId(session);
    const result = await this.#pool.query<SessionRow>(`SELECT * FROM ${this.#table("sessions")} WHERE session = $1`, [
      session,
    ]);
    const row = result.rows[0];
    if (row !== undefined) this.#checkSummaryEnd(session, row);
    return row;
  }

  /**
   * A put writes the summary at the digest's last seq and the projector only moves it forward (a
   * restored session going on), so an archived summary that ends before the archived events was edited.
   */
  #checkSummaryEnd(session: string, row: SummaryEndColumns): void {
    const recorded = recordedDigest(row);
    if (row.archived && recorded !== undefined && Number(row.last_seq) < recorded.lastSeq)
      checkSummaryEnd(Number(row.last_seq), recorded.lastSeq, this.#where("sessions", session), "summary");
  }

  /** The digest of the stored envelope text (not the recorded columns: an edited row must show). */
  async #digestWith(client: PoolClient, session: string): Promise<LogDigest | undefined> {
    assertSessionId(session);
    const row = await client.query<{ archived: boolean }>(
      `SELECT archived FROM ${this.#table("sessions")} WHERE session = $1`,
      [session],
    );
    if (row.rows[0]?.archived !== true) return undefined;
    const builder = new DigestBuilder();
    for await (const { envelope } of this.#eventRows(client, session, 1, undefined))
      builder.add(envelope, claimedSeq(envelope));
    return builder.digest();
  }

  /** A session's event rows in seq order, a page at a time. */
  async *#eventRows(
    client: PoolClient,
    session: string,
    fromSeq: number,
    toSeq: number | undefined,
  ): AsyncGenerator<{ seq: number; envelope: string }> {
    let next = fromSeq;
    for (;;) {
      const page = await client.query<{ seq: string; envelope: string }>(
        `SELECT seq, envelope FROM ${this.#table("events")}
          WHERE session = $1 AND seq >= $2 AND ($3::bigint IS NULL OR seq <= $3) ORDER BY seq LIMIT $4`,
        [session, next, toSeq ?? null, PAGE_ROWS],
      );
      for (const row of page.rows) yield { seq: Number(row.seq), envelope: row.envelope };
      if (page.rows.length < PAGE_ROWS) return;
      next = Number(page.rows.at(-1)!.seq) + 1;
    }
  }

  /** The summary row: a put's (archived, with its copy's state and digest) or a live one's. */
  async #writeSummary(
    client: PoolClient,
    summary: ArchivedSummary,
    archived: { state: SessionState; digest: LogDigest } | undefined,
  ): Promise<void> {
    const values = [
      summary.session,
      summary.status,
      summary.turns,
      summary.attempts,
      String(summary.costUsd),
      summary.tokens.input,
      summary.tokens.output,
      summary.tokens.cacheRead,
      summary.tokens.cacheCreation,
      summary.model,
      summary.cwd,
      JSON.stringify(summary.labels),
      timestampOf(summary.firstAt),
      timestampOf(summary.lastAt),
      summary.lastSeq,
      JSON.stringify(summary.errorKinds),
      JSON.stringify(summary.decisions),
      summary.lastErrorKind,
      summary.tenant,
    ];
    const columns = SUMMARY_COLUMNS;
    const updates = `status = EXCLUDED.status, turns = EXCLUDED.turns, attempts = EXCLUDED.attempts,
      cost_usd = EXCLUDED.cost_usd, tokens_input = EXCLUDED.tokens_input, tokens_output = EXCLUDED.tokens_output,
      tokens_cache_read = EXCLUDED.tokens_cache_read, tokens_cache_creation = EXCLUDED.tokens_cache_creation,
      model = EXCLUDED.model, cwd = EXCLUDED.cwd, labels = EXCLUDED.labels, first_at = EXCLUDED.first_at,
      last_at = EXCLUDED.last_at, last_seq = EXCLUDED.last_seq, error_kinds = EXCLUDED.error_kinds,
      decisions = EXCLUDED.decisions, last_error_kind = EXCLUDED.last_error_kind, tenant = EXCLUDED.tenant,
      updated_at = now()`;
    const placeholders = values.map((_, index) => `$${index + 1}`).join(", ");
    if (archived === undefined) {
      await client.query(
        `INSERT INTO ${this.#table("sessions")} (${columns}) VALUES (${placeholders})
          ON CONFLICT (session) DO UPDATE SET ${updates}
          WHERE ${this.#table("sessions")}.last_seq <= EXCLUDED.last_seq`,
        values,
      );
      return;
    }
    const { state, digest } = archived;
    const more = [JSON.stringify(state), digest.count, digest.lastSeq, digest.sha256];
    const base = values.length;
    await client.query(
      `INSERT INTO ${this.#table("sessions")} (${columns}, state, digest_count, digest_last_seq, digest_sha256, archived)
        VALUES (${placeholders}, $${base + 1}, $${base + 2}, $${base + 3}, $${base + 4}, true)
        ON CONFLICT (session) DO UPDATE SET ${updates}, state = EXCLUDED.state, digest_count = EXCLUDED.digest_count,
          digest_last_seq = EXCLUDED.digest_last_seq, digest_sha256 = EXCLUDED.digest_sha256, archived = true`,
      [...values, ...more],
    );
  }

  async #insertEvents(client: PoolClient, events: readonly Envelope[], lines: readonly string[]): Promise<void> {
    for (let start = 0; start < events.length; start += PAGE_ROWS) {
      const page = events.slice(start, start + PAGE_ROWS);
      await client.query(
        `INSERT INTO ${this.#table("events")} (session, seq, kind, turn, attempt, at, envelope)
          SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::int[], $6::timestamptz[], $7::text[])`,
        [
          page.map((event) => event.session),
          page.map((event) => event.seq),
          page.map((event) => event.kind),
          page.map((event) => event.turn),
          page.map((event) => event.attempt),
          page.map((event) => timestampOf(event.at)),
          lines.slice(start, start + PAGE_ROWS),
        ],
      );
    }
  }

  async #insertToolCalls(client: PoolClient, session: string, events: readonly Envelope[]): Promise<void> {
    const rows = toolCallRows(events);
    for (let start = 0; start < rows.length; start += PAGE_ROWS) {
      const page = rows.slice(start, start + PAGE_ROWS);
      await client.query(
        `INSERT INTO ${this.#table("tool_calls")}
          (session, turn, attempt, tool_use_id, name, started_at, ended_at, is_error)
          SELECT $1, * FROM unnest($2::text[], $3::int[], $4::text[], $5::text[], $6::timestamptz[],
            $7::timestamptz[], $8::boolean[])`,
        [
          session,
          page.map((row) => row.turn),
          page.map((row) => row.attempt),
          page.map((row) => row.toolUseId),
          page.map((row) => row.name),
          page.map((row) => row.startedAt),
          page.map((row) => row.endedAt),
          page.map((row) => row.isError),
        ],
      );
    }
  }

  async #insertDecisions(client: PoolClient, session: string, events: readonly Envelope[]): Promise<void> {
    const rows = decisionRows(events);
    for (let start = 0; start < rows.length; start += PAGE_ROWS) {
      const page = rows.slice(start, start + PAGE_ROWS);
      await client.query(
        `INSERT INTO ${this.#table("decisions")}
          (session, seq, request_id, turn, tool, decision, decided_by, source, reason, at)
          SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
            $8::text[], $9::text[], $10::timestamptz[])`,
        [
          session,
          page.map((row) => row.seq),
          page.map((row) => row.requestId),
          page.map((row) => row.turn),
          page.map((row) => row.tool),
          page.map((row) => row.decision),
          page.map((row) => row.by),
          page.map((row) => row.source),
          page.map((row) => row.reason),
          page.map((row) => row.at),
        ],
      );
    }
  }
}

/** The failing statement reports the error; the event is only the socket saying it too. */
function ignoreSocketError(): void {}

function recordedDigest(row: RecordedDigestColumns): LogDigest | undefined {
  if (row.digest_count === null || row.digest_last_seq === null || row.digest_sha256 === null) return undefined;
  return { count: Number(row.digest_count), lastSeq: Number(row.digest_last_seq), sha256: row.digest_sha256 };
}

/**
 * The row as a summary (checked against the summary's schema by the caller: a row is untrusted input).
 * Times come back as ISO strings from timestamptz: the log writes them so, and one that was not a time is null.
 */
function summaryOfRow(row: SessionRow): unknown {
  return {
    session: row.session,
    status: row.status,
    turns: row.turns,
    attempts: row.attempts,
    costUsd: Number(row.cost_usd),
    tokens: {
      input: Number(row.tokens_input),
      output: Number(row.tokens_output),
      cacheRead: Number(row.tokens_cache_read),
      cacheCreation: Number(row.tokens_cache_creation),
    },
    model: row.model,
    cwd: row.cwd,
    labels: row.labels,
    firstAt: row.first_at === null ? null : row.first_at.toISOString(),
    lastAt: row.last_at === null ? null : row.last_at.toISOString(),
    lastSeq: Number(row.last_seq),
    errorKinds: row.error_kinds,
    decisions: row.decisions,
    lastErrorKind: row.last_error_kind,
    tenant: row.tenant,
  };
}
