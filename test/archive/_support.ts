// What the archive tests share: real-looking logs (a recorded fixture loaded through a real EventLog
// on Redis and read back, so envelopes are exactly what the log gives) and copies built from them.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import pg from "pg";
import {
  FileArchive,
  logDigest,
  PostgresArchive,
  summarize,
  type Archive,
  type SessionCopy,
  type SessionState,
} from "../../src/archive/index.ts";
import {
  connectRedis,
  createEventLog,
  importFile,
  type Envelope,
  type EventLog,
  type RedisClient,
} from "../../src/log/index.ts";

import { testSpace } from "../worker/_support.ts";

export const FIXTURES = join(import.meta.dirname, "..", "fixtures", "logs");

export function uniqueId(stem: string): string {
  return `${stem}-${randomBytes(5).toString("hex")}`;
}

/**
 * A fixture's events as the log gives them back under `session`: imported into a real EventLog (own
 * key prefix), read, and the keys removed again.
 */
export async function loggedEvents(fixture: string, session: string): Promise<Envelope[]> {
  const redis = connectRedis();
  const prefix = `tar${randomBytes(5).toString("hex")}:`;
  try {
    const log = createEventLog({ redis, prefix });
    await importFile(log, session, join(FIXTURES, `${fixture}.jsonl`));
    const events: Envelope[] = [];
    for await (const envelope of log.read(session)) events.push(envelope);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    return events;
  } finally {
    redis.disconnect();
  }
}

export function stateOf(turns: number): SessionState {
  const registered: Record<string, string> = {};
  for (let index = 1; index <= turns; index++) registered[`t${index}`] = "1";
  return { meta: { epoch: "3", seq: "0" }, conf: { warm: "off" }, registered };
}

/** The archive copy of `events` (the first `upTo` of them when given). */
export function copyOf(session: string, events: readonly Envelope[], upTo = events.length): SessionCopy {
  const kept = events.slice(0, upTo);
  return {
    session,
    events: kept,
    state: stateOf(kept.filter((event) => event.kind === "turn.queued").length),
    summary: summarize(session, kept),
    digest: logDigest(kept),
  };
}

/** The JSON text of each envelope read, for byte-for-byte comparison. */
export async function readTexts(source: AsyncIterable<Envelope>): Promise<string[]> {
  const texts: string[] = [];
  for await (const envelope of source) texts.push(JSON.stringify(envelope));
  return texts;
}

/**
 * What every store promises of a copy it holds: the events read back byte for byte, the digest
 * recomputed from what it holds, the state, the summary and the record as put.
 */
export async function assertHoldsCopy(archive: Archive, copy: SessionCopy): Promise<void> {
  const { session, events } = copy;
  assert.deepEqual(
    await readTexts(archive.read(session)),
    events.map((event) => JSON.stringify(event)),
  );
  assert.deepEqual(await archive.digest(session), logDigest(events));
  assert.deepEqual(await archive.state(session), copy.state);
  assert.deepEqual(await archive.summary(session), summarize(session, events));
  assert.deepEqual(await archive.record(session), { state: copy.state, summary: summarize(session, events) });
}

/** Every key matching the patterns (SCAN), sorted. */
export async function keysUnder(redis: RedisClient, ...patterns: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const pattern of patterns) {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 500);
      cursor = next;
      out.push(...keys);
    } while (cursor !== "0");
  }
  return out.sort();
}

/** Every event of a session in the log. */
export async function readLog(log: EventLog, session: string): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const ev of log.read(session)) out.push(ev);
  return out;
}

/** An archive whose stored state reads back changed by `tamper`: a store someone edited. */
export function tamperedState(archive: Archive, tamper: (state: SessionState) => void): Archive {
  return new Proxy(archive, {
    get(target, property) {
      const value = Reflect.get(target, property) as unknown;
      // Methods run on the store itself (its private fields are not the proxy's).
      if (property !== "state") return typeof value === "function" ? value.bind(target) : value;
      return async (session: string) => {
        const state = await target.state(session);
        if (state !== undefined) tamper(state);
        return state;
      };
    },
  });
}

/**
 * File and PostgreSQL archives for one test file: `stores(name)` opens a fresh folder and schema, both
 * migrated; `admin` is a PostgreSQL client for planting rows; `close` closes them and drops the schemas.
 */
export class ArchivePairs {
  readonly baseUrl = process.env["ARCHIVE_TEST_PG"] ?? "postgres://postgres@127.0.0.1:5432/test";
  readonly space = testSpace();
  readonly admin = new pg.Client({ connectionString: this.baseUrl });
  readonly #schemaStem: string;
  readonly #schemas: string[] = [];
  readonly #opened: Archive[] = [];

  constructor(stem: string) {
    this.#schemaStem = `${stem}_${randomBytes(5).toString("hex")}`;
  }

  async connect(): Promise<void> {
    await this.admin.connect();
  }

  async stores(name: string): Promise<{ file: FileArchive; postgres: PostgresArchive; schema: string }> {
    const schema = `${this.#schemaStem}_${name}`;
    this.#schemas.push(schema);
    const file = new FileArchive(this.space.dir(`archive-${name}`));
    const postgres = new PostgresArchive({ connectionString: this.baseUrl, schema });
    this.#opened.push(file, postgres);
    await file.migrate();
    await postgres.migrate();
    return { file, postgres, schema };
  }

  async close(): Promise<void> {
    for (const store of this.#opened) await store.close();
    for (const schema of this.#schemas) await this.admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await this.admin.end();
    this.space.cleanup();
  }
}
