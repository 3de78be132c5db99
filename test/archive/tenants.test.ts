// A session's tenant in the archive, in both stores (a file folder in a tmp dir, its own PostgreSQL
// schema): the summary carries it, a listing filters by it (`turnstream sessions --archive URL
// --tenant T` too), a copy stored before it was kept reads back without one, a stored tenant edited to
// something else than a tenant name is left out of a listing as corrupt, and migration 4 gives rows
// stored before it the tenant their events name.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import {
  ArchiveCorruptError,
  FileArchive,
  InvalidArchiveListingError,
  PostgresArchive,
  summarize,
  type Archive,
} from "../../src/archive/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { turnstream } from "../bin/_cli.ts";
import { testSpace } from "../worker/_support.ts";
import { ArchivePairs, copyOf, loggedEvents, uniqueId } from "./_support.ts";

const pairs = new ArchivePairs("tt");
const { admin, baseUrl, space } = pairs;
const stores = (name: string) => pairs.stores(name);

const ESC = "\u001b";
const HOSTILE = `acme${ESC}[2J${ESC}]8;;http://evil${ESC}\\`;
const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/;

/** A recorded session's events under `session`, its turns queued for `tenant` (left as they were when undefined). */
async function eventsOf(session: string, tenant: string | undefined, fixture = "today-session"): Promise<Envelope[]> {
  const events = await loggedEvents(fixture, session);
  if (tenant === undefined) return events;
  return events.map((event) =>
    event.kind === "turn.queued" ? { ...event, data: { ...(event.data as object), tenant } } : event,
  );
}

function editHeader(archive: FileArchive, session: string, edit: (summary: Record<string, unknown>) => void): void {
  const path = join(archive.dir, `${session}.jsonl.gz`);
  const lines = gunzipSync(readFileSync(path)).toString("utf8").split("\n");
  const header = JSON.parse(lines[0]!) as { summary: Record<string, unknown> };
  edit(header.summary);
  lines[0] = JSON.stringify(header);
  writeFileSync(path, gzipSync(lines.join("\n")));
}

describe("the archive's tenants", () => {
  before(() => pairs.connect());
  after(() => pairs.close());

  const planned = [
    { id: uniqueId("ta"), tenant: "acme/api" },
    { id: uniqueId("ta"), tenant: "acme/api" },
    { id: uniqueId("ta"), tenant: "globex" },
    { id: uniqueId("ta"), tenant: undefined },
    // An imported log's word: not a tenant name, so the session has none.
    { id: uniqueId("ta"), tenant: HOSTILE },
  ];
  const events = new Map<string, Envelope[]>();

  before(async () => {
    for (const { id, tenant } of planned) events.set(id, await eventsOf(id, tenant));
  });

  for (const kind of ["file", "postgres"] as const) {
    it(`${kind}: the summary carries the tenant; a listing filters by it; an old copy has none; an edited one is left out`, async () => {
      const all = await stores(`filter_${kind}`);
      const archive = all[kind];
      for (const { id } of planned) await archive.put(copyOf(id, events.get(id)!));
      const [acmeA, acmeB, globex, none, hostile] = planned.map((entry) => entry.id) as [
        string,
        string,
        string,
        string,
        string,
      ];
      assert.equal((await archive.summary(acmeA))!.tenant, "acme/api");
      assert.equal((await archive.summary(none))!.tenant, null);
      assert.equal((await archive.summary(hostile))!.tenant, null);
      for (const { id } of planned) assert.deepEqual(await archive.summary(id), summarize(id, events.get(id)!));

      const ids = async (tenant: string | undefined): Promise<string[]> =>
        (await archive.summaries({ tenant })).map((entry) => entry.summary.session).sort();
      assert.deepEqual(await ids("acme/api"), [acmeA, acmeB].sort());
      assert.deepEqual(await ids("globex"), [globex]);
      assert.deepEqual(await ids("nobody"), []);
      assert.equal((await ids(undefined)).length, planned.length);
      for (const bad of [HOSTILE, "", "a'; DROP TABLE x; --"])
        await assert.rejects(archive.summaries({ tenant: bad }), InvalidArchiveListingError);

      // A copy stored before summaries kept the tenant: read back as none, not as corrupt.
      // An edited tenant that is not a tenant name: left out of the listing (told), refused alone.
      if (archive instanceof FileArchive) {
        editHeader(archive, none, (summary) => delete summary["tenant"]);
        editHeader(archive, globex, (summary) => (summary["tenant"] = HOSTILE));
      } else {
        const table = `"${all.schema}".turnstream_sessions`;
        await admin.query(`UPDATE ${table} SET tenant = NULL WHERE session = $1`, [none]);
        await admin.query(`UPDATE ${table} SET tenant = $2 WHERE session = $1`, [globex, HOSTILE]);
      }
      assert.equal((await archive.summary(none))!.tenant, null);
      await assert.rejects(archive.summary(globex), ArchiveCorruptError);
      const told: ArchiveCorruptError[] = [];
      const listed = await archive.summaries({ onCorrupt: (err) => told.push(err) });
      assert.equal(listed.length, planned.length - 1);
      assert.equal(told.length, 1);
      assert.match(told[0]!.message, /tenant/);
      assert.doesNotMatch(told[0]!.message, UNSAFE);
    });
  }

  it("turnstream sessions --archive URL --tenant T lists that tenant's archived sessions", async () => {
    const { file, postgres, schema } = await stores("cli");
    for (const { id } of planned) {
      await file.put(copyOf(id, events.get(id)!));
      await postgres.put(copyOf(id, events.get(id)!));
    }
    for (const url of [`file://${file.dir}`, `${baseUrl}?schema=${schema}`]) {
      const run = await turnstream(["sessions", "--json", "--archive", url, "--tenant", "acme/api"], {
        TURNSTREAM_PREFIX: space.logPrefix,
      });
      assert.equal(run.code, 0, run.stderr);
      const rows = run.stdout
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      assert.deepEqual(rows.map((row) => row["session"]).sort(), [planned[0]!.id, planned[1]!.id].sort(), url);
      for (const row of rows) assert.equal(row["tenant"], "acme/api");
      const table = await turnstream(["sessions", "--archive", url], { TURNSTREAM_PREFIX: space.logPrefix });
      assert.equal(table.code, 0, table.stderr);
      assert.match(table.stdout, new RegExp(`${planned[2]!.id}\\s.*\\sglobex\\n`));
      assert.doesNotMatch(table.stdout, UNSAFE);
    }
  });

  it("migration 4: rows stored before it get the tenant their first turn names, when it is a tenant name", async () => {
    const { postgres, schema } = await stores("migrate");
    for (const { id } of planned) await postgres.put(copyOf(id, events.get(id)!));
    const table = `"${schema}".turnstream_sessions`;
    // As a schema at version 3 holds them: no tenant column, no index, migration 4 not applied.
    await admin.query(`DROP INDEX "${schema}".turnstream_sessions_tenant`);
    await admin.query(`DROP INDEX "${schema}".turnstream_sessions_tenant_archived_recent`);
    await admin.query(`ALTER TABLE ${table} DROP COLUMN tenant`);
    await admin.query(`DELETE FROM "${schema}".turnstream_migrations WHERE id = 4`);
    assert.deepEqual((await postgres.migrate()).applied, ["4 tenant of each session"]);
    assert.deepEqual((await postgres.migrate()).applied, []);
    const rows = await admin.query<{ session: string; tenant: string | null }>(`SELECT session, tenant FROM ${table}`);
    const tenants = new Map(rows.rows.map((row) => [row.session, row.tenant]));
    for (const { id, tenant } of planned)
      assert.equal(tenants.get(id), tenant === HOSTILE ? null : (tenant ?? null), String(tenant));
    for (const { id } of planned) assert.deepEqual(await postgres.summary(id), summarize(id, events.get(id)!));
  });

  it("postgres: one tenant's archived sessions, newest first, are read along the tenant's index", async () => {
    const { postgres, schema } = await stores("plan");
    for (const { id } of planned) await postgres.put(copyOf(id, events.get(id)!));
    await admin.query("BEGIN");
    try {
      await admin.query("SET LOCAL enable_seqscan = off");
      const plan = await admin.query<{ "QUERY PLAN": string }>(
        `EXPLAIN SELECT session FROM "${schema}".turnstream_sessions
          WHERE archived AND tenant = 'acme/api' ORDER BY last_at DESC NULLS LAST, session COLLATE "C" LIMIT 10`,
      );
      assert.match(plan.rows.map((row) => row["QUERY PLAN"]).join("\n"), /turnstream_sessions_tenant/);
    } finally {
      await admin.query("ROLLBACK");
    }
  });
});
