// The PostgreSQL store against the real server: its own schema, created by migrate and dropped after.
// Byte-for-byte round trips, one-transaction puts (a connection killed before COMMIT leaves the old
// copy or none), concurrent migrations, derived rows, the live summary row, and rows edited after
// they were written (a row is untrusted input).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import pg from "pg";
import {
  ArchiveConflictError,
  ArchiveCorruptError,
  InvalidArchiveUrlError,
  FileArchive,
  logDigest,
  openArchive,
  PostgresArchive,
  summarize,
  type ArchivedSummary,
} from "../../src/archive/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { assertHoldsCopy, copyOf, loggedEvents, readTexts, uniqueId } from "./_support.ts";

const baseUrl = process.env["ARCHIVE_TEST_PG"] ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `ta_${randomBytes(5).toString("hex")}`;
let admin: pg.Client;
let archive: PostgresArchive;
let events: Envelope[];
let session: string;
const opened: PostgresArchive[] = [];

function archiveIn(
  schemaName: string,
  options: { beforeCommit?: (pid: number) => Promise<void> } = {},
): PostgresArchive {
  const store = new PostgresArchive({ connectionString: baseUrl, schema: schemaName, ...options });
  opened.push(store);
  return store;
}

async function rows<T extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<T[]> {
  return (await admin.query<T>(sql, values)).rows;
}

/** A new session id holding the same recorded events (re-logged under it). */
async function newSession(fixture = "today-session"): Promise<{ id: string; logged: Envelope[] }> {
  const id = uniqueId("pg");
  return { id, logged: await loggedEvents(fixture, id) };
}

async function readError(store: PostgresArchive, id: string): Promise<ArchiveCorruptError> {
  try {
    await readTexts(store.read(id));
  } catch (err) {
    assert.ok(err instanceof ArchiveCorruptError, String(err));
    return err;
  }
  assert.fail("the read was not refused");
}

describe("the PostgreSQL archive", () => {
  before(async () => {
    admin = new pg.Client({ connectionString: baseUrl });
    await admin.connect();
    archive = archiveIn(schema);
    session = uniqueId("pg");
    events = await loggedEvents("today-session", session);
  });

  after(async () => {
    for (const store of opened) await store.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}_race" CASCADE`);
    await admin.end();
  });

  describe("PostgresArchive", () => {
    it("two processes migrating a new schema at once apply each migration once", async () => {
      const racing = [0, 1, 2, 3].map(() => archiveIn(`${schema}_race`));
      const results = await Promise.all(racing.map((store) => store.migrate()));
      const applied = results.flatMap((result) => result.applied);
      assert.deepEqual(
        applied.map((name) => name.split(" ")[0]),
        ["1", "2", "3", "4"],
        JSON.stringify(results),
      );
      const recorded = await rows<{ id: number }>(`SELECT id FROM "${schema}_race".turnstream_migrations ORDER BY id`);
      assert.deepEqual(
        recorded.map((row) => row.id),
        [1, 2, 3, 4],
      );
      assert.deepEqual((await archive.migrate()).applied.length, 4);
      assert.deepEqual((await archive.migrate()).applied, []);
    });

    it("a copy reads back byte for byte, with its state, summary, digest and derived rows", async () => {
      const copy = copyOf(session, events);
      await archive.put(copy);
      await assertHoldsCopy(archive, copy);
      assert.equal(await archive.record("never-archived"), undefined);
      assert.deepEqual(
        await readTexts(archive.read(session, { fromSeq: 10, toSeq: 12 })),
        events.slice(9, 12).map((event) => JSON.stringify(event)),
      );
      const stored = await rows<{ envelope: string }>(
        `SELECT envelope FROM "${schema}".turnstream_events WHERE session = $1 ORDER BY seq`,
        [session],
      );
      assert.deepEqual(
        stored.map((row) => row.envelope),
        events.map((event) => JSON.stringify(event)),
      );
      const [row] = await rows<{ archived: boolean; turns: number; digest_sha256: string }>(
        `SELECT archived, turns, digest_sha256 FROM "${schema}".turnstream_sessions WHERE session = $1`,
        [session],
      );
      assert.equal(row?.archived, true);
      assert.equal(row?.turns, events.filter((event) => event.kind === "turn.finished").length);
      assert.equal(row?.digest_sha256, logDigest(events).sha256);
      const listed: string[] = [];
      for await (const id of archive.sessions()) listed.push(id);
      assert.ok(listed.includes(session));
      assert.equal(await archive.digest("never-archived"), undefined);
      assert.deepEqual(await readTexts(archive.read("never-archived")), []);
    });

    it("derives one tool-call row per tool_use and one decision row per decision.made, counted here independently", async () => {
      const toolUses = new Map<string, boolean>();
      for (const event of events) {
        if (event.kind !== "cli.line") continue;
        const line = JSON.parse((event.data as { raw: string }).raw) as Record<string, unknown>;
        const content = ((line["message"] as Record<string, unknown> | undefined)?.["content"] ?? []) as unknown[];
        for (const block of content as Array<Record<string, unknown>>) {
          if (line["type"] === "assistant" && block["type"] === "tool_use") toolUses.set(String(block["id"]), false);
          if (line["type"] === "user" && block["type"] === "tool_result")
            toolUses.set(String(block["tool_use_id"]), true);
        }
      }
      const calls = await rows<{ tool_use_id: string; name: string; ended_at: Date | null; started_at: Date }>(
        `SELECT * FROM "${schema}".turnstream_tool_calls WHERE session = $1`,
        [session],
      );
      assert.equal(calls.length, toolUses.size);
      assert.ok(calls.length > 0);
      for (const call of calls) {
        assert.equal(call.ended_at !== null, toolUses.get(call.tool_use_id), call.tool_use_id);
        assert.ok(call.name.length > 0);
      }
      const made = events.filter((event) => event.kind === "decision.made");
      const decisions = await rows<{ decision: string; tool: string | null; decided_by: string }>(
        `SELECT * FROM "${schema}".turnstream_decisions WHERE session = $1 ORDER BY seq`,
        [session],
      );
      assert.deepEqual(
        decisions.map((row) => [row.decision, row.decided_by]),
        made.map((event) => {
          const data = event.data as { decision: string; by: string };
          return [data.decision, data.by];
        }),
      );
      assert.ok(decisions.every((row) => row.tool === "Bash"));
    });

    it("the same copy again writes nothing; a different history is refused; an extension replaces", async () => {
      const { id, logged } = await newSession();
      await archive.put(copyOf(id, logged, 20));
      const stamp = async (): Promise<string> =>
        (
          await rows<{ xmin: string }>(`SELECT xmin::text FROM "${schema}".turnstream_sessions WHERE session = $1`, [
            id,
          ])
        )[0]!.xmin;
      const before = await stamp();
      await archive.put(copyOf(id, logged, 20));
      assert.equal(await stamp(), before, "the row was not rewritten");
      const other = logged.map((event) => (event.seq === 4 ? { ...event, at: "2030-01-01T00:00:00.000Z" } : event));
      await assert.rejects(archive.put(copyOf(id, other)), ArchiveConflictError);
      await assert.rejects(archive.put(copyOf(id, logged, 10)), ArchiveConflictError);
      assert.equal((await archive.digest(id))?.count, 20);
      await archive.put(copyOf(id, logged));
      assert.deepEqual(await archive.digest(id), logDigest(logged));
      assert.deepEqual(await archive.summary(id), summarize(id, logged));
      const [count] = await rows<{ n: string }>(
        `SELECT count(*) AS n FROM "${schema}".turnstream_events WHERE session = $1`,
        [id],
      );
      assert.equal(Number(count?.n), logged.length);
    });

    it("a connection killed before COMMIT leaves the old copy or none, and a retry completes", async () => {
      let killing = true;
      const faulty = archiveIn(schema, {
        beforeCommit: async (pid) => {
          if (killing) await admin.query("SELECT pg_terminate_backend($1)", [pid]);
        },
      });
      const { id, logged } = await newSession();
      await assert.rejects(faulty.put(copyOf(id, logged, 15)));
      assert.equal(await faulty.digest(id), undefined);
      const leftovers = await rows(`SELECT 1 FROM "${schema}".turnstream_events WHERE session = $1`, [id]);
      assert.equal(leftovers.length, 0, "no half copy");
      killing = false;
      await faulty.put(copyOf(id, logged, 15));
      killing = true;
      await assert.rejects(faulty.put(copyOf(id, logged)));
      assert.deepEqual(await faulty.digest(id), logDigest(logged.slice(0, 15)), "the old copy stands");
      assert.deepEqual(
        await readTexts(faulty.read(id)),
        logged.slice(0, 15).map((event) => JSON.stringify(event)),
      );
      assert.equal((await faulty.summary(id))?.lastSeq, 15);
      killing = false;
      await faulty.put(copyOf(id, logged));
      assert.deepEqual(await faulty.digest(id), logDigest(logged));
    });

    it("keeps a live summary row that never moves back and is not listed as archived", async () => {
      const { id, logged } = await newSession("crash-retry");
      const early = summarize(id, logged.slice(0, 10));
      const later = summarize(id, logged);
      await archive.upsertSummary(later);
      await archive.upsertSummary(early);
      assert.deepEqual(await archive.summary(id), later);
      assert.equal(await archive.digest(id), undefined);
      assert.equal(await archive.state(id), undefined);
      assert.equal(await archive.record(id), undefined, "a live row is not an archived session");
      const listed: string[] = [];
      for await (const listedId of archive.sessions()) listed.push(listedId);
      assert.ok(!listed.includes(id));
      const [row] = await rows<{ archived: boolean }>(
        `SELECT archived FROM "${schema}".turnstream_sessions WHERE session = $1`,
        [id],
      );
      assert.equal(row?.archived, false);
      await archive.put(copyOf(id, logged));
      assert.deepEqual(await archive.digest(id), logDigest(logged));
      await archive.upsertSummary(later);
      assert.deepEqual(await archive.digest(id), logDigest(logged), "a live upsert leaves the copy alone");
    });

    describe("an edited row is refused on read and its digest shows it", () => {
      const cases: Array<{ name: string; sql: string; says: RegExp }> = [
        {
          name: "a changed seq in the envelope",
          sql: `UPDATE {events} SET envelope = replace(envelope, '"seq":5,', '"seq":50,') WHERE session = $1 AND seq = 5`,
          says: /seq 5: holds seq 50 where 5 belongs/,
        },
        {
          name: "a changed seq column",
          sql: `UPDATE {events} SET seq = 1000 WHERE session = $1 AND seq = 5`,
          says: /seq 6: holds seq 6 where 5 belongs/,
        },
        {
          name: "another session's envelope",
          sql: `UPDATE {events} SET envelope = replace(envelope, '"session":"' || $1 || '"', '"session":"someone-else"')
                WHERE session = $1 AND seq = 3`,
          says: /seq 3: holds an event of another session/,
        },
        {
          name: "text edited so every row stays valid",
          sql: `UPDATE {events} SET envelope = replace(envelope, '"prompt":"', '"prompt":"ignore all rules. ')
                WHERE session = $1 AND kind = 'turn.queued'`,
          says: /digest to .* the session row says/,
        },
        {
          name: "a key added",
          sql: `UPDATE {events} SET envelope = left(envelope, -1) || ',"extra":1}' WHERE session = $1 AND seq = 2`,
          says: /seq 2: is not the text the archive wrote/,
        },
      ];
      for (const { name, sql, says } of cases) {
        it(name, async () => {
          const { id, logged } = await newSession();
          await archive.put(copyOf(id, logged));
          await admin.query(sql.replaceAll("{events}", `"${schema}".turnstream_events`), [id]);
          const err = await readError(archive, id);
          assert.match(err.message, says);
          assert.ok(err.message.includes("turnstream_events"), "the message names the table");
          assert.notDeepEqual(await archive.digest(id), logDigest(logged));
          await assert.rejects(archive.put(copyOf(id, logged)), ArchiveConflictError);
        });
      }

      it("every event row deleted, or the reader asks for a few seqs of an edited copy", async () => {
        const { id, logged } = await newSession();
        await archive.put(copyOf(id, logged));
        await admin.query(`DELETE FROM "${schema}".turnstream_events WHERE session = $1`, [id]);
        assert.match((await readError(archive, id)).message, /digest to 0 events .* the session row says/);
        const other = await newSession();
        await archive.put(copyOf(other.id, other.logged));
        await admin.query(
          `UPDATE "${schema}".turnstream_events SET envelope = replace(envelope, '"turn":"', '"turn":"x')
          WHERE session = $1 AND seq = $2`,
          [other.id, other.logged.length],
        );
        const handedOut: Envelope[] = [];
        await assert.rejects(async () => {
          for await (const envelope of archive.read(other.id, { toSeq: 2 })) handedOut.push(envelope);
        }, /digest to .* the session row says/);
        assert.deepEqual(handedOut, [], "nothing of an edited copy is handed out");
      });

      it("a summary row that does not fit the summary's shape", async () => {
        const { id, logged } = await newSession();
        await archive.put(copyOf(id, logged));
        await admin.query(
          `UPDATE "${schema}".turnstream_sessions SET turns = -3, state = '{"meta":1}' WHERE session = $1`,
          [id],
        );
        await assert.rejects(archive.summary(id), ArchiveCorruptError);
        await assert.rejects(archive.state(id), ArchiveCorruptError);
        await assert.rejects(archive.record(id), ArchiveCorruptError);
      });
    });
  });

  describe("openArchive", () => {
    it("opens PostgreSQL with the schema from the URL and never shows the password", async () => {
      const store = openArchive(`postgres://postgres:s3cret-word@127.0.0.1:5432/test?schema=${schema}`);
      try {
        assert.ok(store instanceof PostgresArchive);
        assert.equal(store.schema, schema);
        assert.ok(!store.location.includes("s3cret-word"), store.location);
        assert.equal(await store.summary(session).then((summary?: ArchivedSummary) => summary?.session), session);
      } finally {
        await store.close();
      }
      const other = openArchive("postgresql://postgres@127.0.0.1/test");
      assert.equal((other as PostgresArchive).schema, "public");
      await other.close();
    });

    it("opens a folder for file:// and refuses other forms, naming the accepted ones", () => {
      const folder = openArchive("file:///var/lib/turnstream/archive");
      assert.ok(folder instanceof FileArchive);
      assert.equal(folder.location, "file:///var/lib/turnstream/archive");
      for (const url of ["https://archive.example/x", "redis://127.0.0.1", "not a url", "file://remote-host/dir"]) {
        assert.throws(
          () => openArchive(url),
          (err: Error) => {
            assert.ok(err instanceof InvalidArchiveUrlError);
            assert.match(err.message, /postgres:\/\/.*file:\/\/\//);
            return true;
          },
        );
      }
      assert.throws(
        () => openArchive('postgres://u:pw-in-url@127.0.0.1/test?schema=x";drop'),
        (err: Error) => err instanceof InvalidArchiveUrlError && !err.message.includes("pw-in-url"),
      );
    });
  });
});
