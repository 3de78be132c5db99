// Archived sessions listed from their summaries, in both stores (a file folder in a tmp dir, its own
// PostgreSQL schema): newest first, bounded, without reading a copy; `turnstream sessions` and the
// dashboard's fleet list show an archived session's line exactly as they showed it in Redis; a
// summary edited to carry control characters is shown escaped, one with bad numbers is left out.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import {
  ArchiveCorruptError,
  copyOfSession,
  FileArchive,
  PostgresArchive,
  summarize,
  type Archive,
  type ArchivedListing,
} from "../../src/archive/index.ts";
import { startDashboard } from "../../src/dashboard/index.ts";
import { forTerminal } from "../../src/kernel/index.ts";
import { createEventLog, importFile, type Envelope } from "../../src/log/index.ts";
import { turnstream } from "../bin/_cli.ts";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";
import { ArchivePairs, copyOf, FIXTURES, loggedEvents, uniqueId } from "./_support.ts";

const pairs = new ArchivePairs("tl");
const { admin, baseUrl, space } = pairs;
const stores = (name: string) => pairs.stores(name);

describe("archived sessions listed", () => {
  before(() => pairs.connect());
  after(() => pairs.close());

  const ESC = "\u001b";
  const RLO = "\u202e";
  /** Control (but line feed), bidi and invisible characters: what must never reach a terminal or page raw. */
  const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/;

  /** The file store's header line of a session, rewritten by `edit` (someone with access to the folder). */
  function editHeader(archive: FileArchive, session: string, edit: (header: Record<string, unknown>) => void): void {
    const path = join(archive.dir, `${session}.jsonl.gz`);
    const lines = gunzipSync(readFileSync(path)).toString("utf8").split("\n");
    const header = JSON.parse(lines[0]!) as Record<string, unknown>;
    edit(header);
    lines[0] = JSON.stringify(header);
    writeFileSync(path, gzipSync(lines.join("\n")));
  }

  function summaryOf(header: Record<string, unknown>): Record<string, unknown> {
    return header["summary"] as Record<string, unknown>;
  }

  describe("Archive.summaries", () => {
    const cut = [4, 8, 8, 12, 0];
    const sessions: Array<{ id: string; events: Envelope[] }> = [];

    before(async () => {
      const events = await loggedEvents("today-session", "placeholder-id");
      for (const upTo of cut) {
        const id = uniqueId("ls");
        const logged = await loggedEvents("today-session", id);
        sessions.push({ id, events: logged.slice(0, upTo === 0 ? events.length : upTo) });
      }
    });

    for (const kind of ["file", "postgres"] as const) {
      it(`${kind}: newest first by last activity, ties by id, bounded by limit and before; no copy is read`, async () => {
        const opened = await stores(`order_${kind}`);
        const archive = opened[kind];
        for (const { id, events } of sessions) {
          const copy = copyOf(id, events);
          if (id === sessions[0]!.id) copy.state.meta["imported"] = "2026-12-05T10:00:00.000Z";
          await archive.put(copy);
        }
        // The copies' events are gone or garbage: a listing that read them would fail.
        for (const { id } of sessions) {
          if (archive instanceof FileArchive) {
            const path = join(archive.dir, `${id}.jsonl.gz`);
            const header = gunzipSync(readFileSync(path)).toString("utf8").split("\n")[0]!;
            writeFileSync(path, gzipSync(`${header}\nnot an event\n`));
          } else await admin.query(`DELETE FROM "${opened.schema}".turnstream_events WHERE session = $1`, [id]);
        }
        const [four, eightA, eightB, twelve, whole] = sessions;
        const eights = [eightA!.id, eightB!.id].sort();
        const expected = [whole!.id, twelve!.id, ...eights, four!.id];
        const ids = (listed: ArchivedListing[]): string[] => listed.map((entry) => entry.summary.session);
        const all = await archive.summaries();
        assert.deepEqual(ids(all), expected);
        for (const entry of all) {
          const { events } = sessions.find((session) => session.id === entry.summary.session)!;
          assert.deepEqual(entry.summary, summarize(entry.summary.session, events));
        }
        assert.deepEqual(
          all.map((entry) => entry.importedAt),
          [null, null, null, null, "2026-12-05T10:00:00.000Z"],
        );
        assert.deepEqual(ids(await archive.summaries({ limit: 2 })), expected.slice(0, 2));
        assert.deepEqual(ids(await archive.summaries({ limit: 0 })), []);
        const before = twelve!.events.at(-1)!.at;
        assert.deepEqual(ids(await archive.summaries({ before })), [...eights, four!.id]);
        assert.deepEqual(ids(await archive.summaries({ before, limit: 1 })), [eights[0]]);
        await assert.rejects(archive.summaries({ before: "yesterday" }), /not a time/);
        await assert.rejects(archive.summaries({ limit: -1 }), /whole number/);
      });
    }

    it("a summary edited to hold bad numbers or another session's id is left out (told) or refused", async () => {
      const { file, postgres, schema } = await stores("attack");
      const put = async (archive: Archive): Promise<string[]> => {
        const ids: string[] = [];
        for (let index = 0; index < 4; index++) {
          const id = uniqueId("bad");
          await archive.put(copyOf(id, await loggedEvents("today-session", id)));
          ids.push(id);
        }
        return ids;
      };
      const fileIds = await put(file);
      editHeader(file, fileIds[0]!, (header) => (summaryOf(header)["turns"] = -1));
      editHeader(file, fileIds[1]!, (header) => (summaryOf(header)["costUsd"] = "0.5"));
      editHeader(file, fileIds[2]!, (header) => (summaryOf(header)["session"] = fileIds[3]));
      const pgIds = await put(postgres);
      const table = `"${schema}".turnstream_sessions`;
      await admin.query(`UPDATE ${table} SET cost_usd = -2 WHERE session = $1`, [pgIds[0]]);
      await admin.query(`UPDATE ${table} SET tokens_input = 9007199254740993 WHERE session = $1`, [pgIds[1]]);
      await admin.query(`UPDATE ${table} SET labels = '{"team": 7}' WHERE session = $1`, [pgIds[2]]);
      // A row no put wrote, under an id no session may have.
      await admin.query(
        `INSERT INTO ${table} (session, status, turns, attempts, cost_usd, tokens_input, tokens_output,
        tokens_cache_read, tokens_cache_creation, last_seq, decisions, archived, last_at)
        VALUES ($1, 'finished', 1, 1, 0, 0, 0, 0, 0, 1, '{"allowed":0,"denied":0,"pending":0}', true, now())`,
        [`x${ESC}[2J${RLO}`],
      );
      for (const [archive, ids, corrupt] of [
        [file, fileIds, 3],
        [postgres, pgIds, 4],
      ] as const) {
        await assert.rejects(archive.summaries(), ArchiveCorruptError);
        const told: ArchiveCorruptError[] = [];
        const listed = await archive.summaries({ onCorrupt: (err) => told.push(err) });
        assert.deepEqual(
          listed.map((entry) => entry.summary.session),
          [ids[3]],
        );
        assert.equal(told.length, corrupt);
        for (const err of told) assert.doesNotMatch(err.message, UNSAFE, "a message shows no raw control character");
      }
    });
  });

  /** The dashboard's fleet snapshot (the `sessions` event of /api/fleet), parsed. */
  async function fleetRows(redis: ReturnType<typeof redisFor>, archive: Archive | undefined): Promise<unknown[]> {
    const dashboard = await startDashboard({ redis, prefix: space.logPrefix, archive, port: 0 });
    const ac = new AbortController();
    try {
      const res = await fetch(new URL("api/fleet", dashboard.url), { signal: ac.signal });
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      for (;;) {
        const found = /event: sessions\ndata: (.*)\n\n/.exec(text);
        if (found !== null) return JSON.parse(found[1]!) as unknown[];
        const chunk = await reader.read();
        assert.equal(chunk.done, false, "the stream ended before the sessions snapshot");
        text += decoder.decode(chunk.value, { stream: true });
      }
    } finally {
      ac.abort();
      await dashboard.close();
    }
  }

  /** `turnstream sessions --json` rows by session id. */
  async function listedRows(extra: string[]): Promise<{ rows: Map<string, string>; stderr: string }> {
    const run = await turnstream(["sessions", "--json", ...extra], { TURNSTREAM_PREFIX: space.logPrefix });
    assert.equal(run.code, 0, run.stderr);
    const rows = new Map<string, string>();
    for (const line of run.stdout.split("\n").filter((text) => text !== ""))
      rows.set((JSON.parse(line) as { session: string }).session, line);
    return { rows, stderr: run.stderr };
  }

  function byId(rows: unknown[]): Map<string, Record<string, unknown>> {
    return new Map(rows.map((row) => [(row as { session: string }).session, row as Record<string, unknown>]));
  }

  describe("listings of archived sessions", () => {
    it("sessions and the console's fleet list show an archived session as they did in Redis; edits escaped or left out", async () => {
      const redis = redisFor();
      const log = createEventLog({ redis, prefix: space.logPrefix });
      const { file, postgres, schema } = await stores("cli");
      const pgUrl = `${baseUrl}?schema=${schema}`;
      try {
        // A finished session, one whose turns failed, and one that will stay live.
        const ids = ["today-session", "api-errors", "denials"].map((fixture) => ({ fixture, id: uniqueId("ls") }));
        for (const { fixture, id } of ids) await importFile(log, id, join(FIXTURES, `${fixture}.jsonl`));
        const [finished, failed, live] = ids.map((entry) => entry.id) as [string, string, string];
        const inRedis = await listedRows([]);
        const fleetInRedis = byId(await fleetRows(redis, undefined));
        assert.match(inRedis.rows.get(failed)!, /"status":"failed"/);
        assert.doesNotMatch(inRedis.rows.get(failed)!, /"lastErrorKind":null/);
        assert.match(inRedis.rows.get(finished)!, /"source":"log","imported":"/);

        for (const id of [finished, failed]) {
          const copy = await copyOfSession(log, redis, id);
          await file.put(copy);
          await postgres.put(copy);
        }
        // As retention leaves it: the keys gone, so the index forgets the sessions.
        for (const id of [finished, failed]) {
          const keys = log.keys(id);
          await redis.del(keys.events, keys.meta, keys.blobs);
        }
        assert.equal((await log.stat(finished)).exists, false);

        for (const url of [`file://${file.dir}`, pgUrl]) {
          const archived = await listedRows(["--archive", url]);
          assert.equal(archived.stderr, "");
          for (const id of [finished, failed, live]) assert.equal(archived.rows.get(id), inRedis.rows.get(id), url);
          assert.deepEqual(
            [...archived.rows.keys()].slice(0, 2),
            [failed, finished].sort(sortByLastActivity(archived)),
          );
        }
        for (const archive of [file, postgres]) {
          const fleet = byId(await fleetRows(redis, archive));
          for (const id of [finished, failed])
            assert.deepEqual(fleet.get(id), { ...fleetInRedis.get(id), archived: true }, archive.location);
          assert.deepEqual(fleet.get(live), fleetInRedis.get(live));
        }

        // Edited: control characters in the texts are shown escaped; a bad number leaves the row out.
        const edited = {
          status: `finished${ESC}[2J${RLO}`,
          lastErrorKind: `boom${ESC}]8;;http://x${ESC}\\`,
          lastAt: `2026-12-06T00:00:00.000Z${RLO}`,
        };
        editHeader(file, finished, (header) => Object.assign(summaryOf(header), edited));
        editHeader(file, failed, (header) => (summaryOf(header)["lastSeq"] = 1.5));
        const table = await turnstream(["sessions", "--archive", `file://${file.dir}`], {
          TURNSTREAM_PREFIX: space.logPrefix,
        });
        assert.equal(table.code, 0, table.stderr);
        assert.match(table.stdout, new RegExp(finished));
        assert.doesNotMatch(table.stdout, new RegExp(failed));
        assert.doesNotMatch(table.stdout, UNSAFE);
        assert.match(table.stderr, new RegExp(`left out of the listing: .*${failed}.*lastSeq`));
        const fleet = byId(await fleetRows(redis, file));
        assert.equal(fleet.has(failed), false);
        const shown = fleet.get(finished)!;
        assert.equal(shown["archived"], true);
        assert.doesNotMatch(JSON.stringify(shown), UNSAFE);
        assert.equal(shown["status"], forTerminal(edited.status));
        assert.equal(shown["lastErrorKind"], forTerminal(edited.lastErrorKind));
        assert.equal(shown["lastActivity"], forTerminal(edited.lastAt));
      } finally {
        await cleanupKeys(redis, space);
        redis.disconnect();
      }
    });
  });

  /** Sorts ids as a listing of `rows` would: least recently active first. */
  function sortByLastActivity(listed: { rows: Map<string, string> }): (left: string, right: string) => number {
    const at = (id: string): string => (JSON.parse(listed.rows.get(id)!) as { lastActivity: string }).lastActivity;
    return (left, right) => at(left).localeCompare(at(right));
  }
});
