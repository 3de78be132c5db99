// The archive played as an attacker would: an archive file or row is untrusted input, a session id
// or a URL is text from outside, retention races the producers and workers. Each test is one attack
// against the real code (real Redis under its own prefix, real PostgreSQL in its own schema, tmp dirs).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { copyFileSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import pg from "pg";
import {
  ArchiveCorruptError,
  archiveRestorer,
  copyOfSession,
  FileArchive,
  InvalidArchiveUrlError,
  openArchive,
  PostgresArchive,
  restoreSession,
  runRetention,
  SessionHistory,
  type RetentionStep,
} from "../../src/archive/index.ts";
import {
  createEventLog,
  importFile,
  InvalidSessionIdError,
  type Envelope,
  type EventLog,
} from "../../src/log/index.ts";
import { createProducer, type Producer } from "../../src/queue/index.ts";
import { rerunSession } from "../../src/bin/commands/_rerun.ts";
import { RecordingRefusedError } from "../../src/rerun/index.ts";
import { turnstream } from "../bin/_cli.ts";
import { cleanupKeys, redisFor, testSpace, type TestSpace } from "../worker/_support.ts";
import { copyOf, FIXTURES, loggedEvents, readLog, readTexts, uniqueId } from "./_support.ts";

const HOUR = 3_600_000;
const baseUrl = process.env["ARCHIVE_TEST_PG"] ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `tatk_${randomBytes(5).toString("hex")}`;

let space: TestSpace;
let redis: ReturnType<typeof redisFor>;
let producer: Producer;
let log: EventLog;
let admin: pg.Client;
let sql: PostgresArchive;
let recorded: Envelope[];
let recordedSession: string;

async function fileArchive(): Promise<FileArchive> {
  const archive = new FileArchive(space.dir(`archive-${randomBytes(4).toString("hex")}`));
  await archive.migrate();
  return archive;
}

function fileOf(archive: FileArchive, session: string): string {
  return join(archive.dir, `${session}.jsonl.gz`);
}

function editLines(path: string, edit: (lines: string[]) => void): void {
  const lines = gunzipSync(readFileSync(path)).toString("utf8").split("\n");
  edit(lines);
  writeFileSync(path, gzipSync(lines.join("\n")));
}

/** A session with one turn run to its end the way a worker runs it, whose last event carries `text` on stderr. */
async function finishedSession(stderrText = "done"): Promise<{ session: string; turn: string; epoch: number }> {
  const { session, turn } = await producer.enqueueTurn({
    prompt: "hello",
    cwd: space.workspace(),
    idempotencyKey: randomUUID(),
  });
  const token = randomUUID();
  assert.equal((await producer.order.acquire(session, turn, token, 30_000)).status, "ok");
  const { epoch, attempt } = await log.beginAttempt(session, turn);
  await log.append(session, epoch, [
    { turn, attempt, kind: "attempt.started", data: { worker: "w1" } },
    { turn, attempt, kind: "cli.stderr", data: { text: stderrText } },
    { turn, attempt, kind: "turn.finished", data: { attempt, cliSessionId: "cli-1" } },
  ]);
  await producer.order.finish(session, turn, token);
  return { session, turn, epoch };
}

function retention(
  archive: FileArchive | PostgresArchive,
  afterStep?: (session: string, step: RetentionStep) => unknown,
) {
  return runRetention({
    log,
    redis,
    queue: producer.queue,
    archive,
    olderThanMs: HOUR,
    now: Date.now() + 2 * HOUR,
    ...(afterStep === undefined ? {} : { afterStep: async (session, step) => void (await afterStep(session, step)) }),
  });
}

async function entryOf(report: Awaited<ReturnType<typeof retention>>, session: string) {
  const entry = report.sessions.find((candidate) => candidate.session === session);
  assert.ok(entry, `retention did not consider ${session}`);
  return entry;
}

describe("attacks on the archive", () => {
  before(async () => {
    space = testSpace();
    redis = redisFor();
    producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
    log = createEventLog({ redis, prefix: space.logPrefix });
    admin = new pg.Client({ connectionString: baseUrl });
    await admin.connect();
    sql = new PostgresArchive({ connectionString: baseUrl, schema });
    await sql.migrate();
    recordedSession = uniqueId("atk");
    recorded = await loggedEvents("today-session", recordedSession);
  });
  after(async () => {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    await sql.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    space.cleanup();
  });

  it("1. session ids crafted for path traversal or SQL are refused by both stores before any I/O", async () => {
    const files = await fileArchive();
    const crafted = ["../../etc/passwd", "a/b", "..", ".tmp-x", "x'; DROP TABLE turnstream_events; --", "", "é"];
    for (const id of crafted) {
      for (const store of [files, sql]) {
        await assert.rejects(readTexts(store.read(id)), InvalidSessionIdError, id);
        await assert.rejects(store.state(id), InvalidSessionIdError, id);
        await assert.rejects(store.put({ ...copyOf(recordedSession, recorded), session: id }), Error, id);
      }
    }
    const tables = await admin.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1`, [schema]);
    assert.equal(tables.rows[0].n, 5, "every table is still there");
  });

  it("2. an archive file swapped for another session's is refused, and a restore writes nothing", async () => {
    const files = await fileArchive();
    const victim = await finishedSession();
    const other = await finishedSession("other");
    await files.put(await copyOfSession(log, redis, victim.session));
    await files.put(await copyOfSession(log, redis, other.session));
    copyFileSync(fileOf(files, other.session), fileOf(files, victim.session));
    await assert.rejects(readTexts(files.read(victim.session)), /header is of session/);
    await log.destroy(victim.session);
    await assert.rejects(restoreSession(log, redis, files, victim.session), ArchiveCorruptError);
    assert.equal((await log.stat(victim.session)).lastSeq, 0);
  });

  it("3. a symlink in the archive folder (to a copy elsewhere, or to a FIFO) is refused, never followed", async () => {
    const files = await fileArchive();
    const { session } = await finishedSession();
    // A valid copy of this very session kept outside the folder, linked in by whoever reaches the folder.
    const elsewhere = await fileArchive();
    await elsewhere.put(await copyOfSession(log, redis, session));
    symlinkSync(fileOf(elsewhere, session), fileOf(files, session));
    await assert.rejects(readTexts(files.read(session)), /not a regular file/);
    await assert.rejects(files.state(session), /not a regular file/);
    await assert.rejects(files.digest(session), /not a regular file/);
    // A FIFO would block a reader forever.
    const fifoSession = uniqueId("fifo");
    execFileSync("mkfifo", [fileOf(files, fifoSession)]);
    await assert.rejects(readTexts(files.read(fifoSession)), /not a regular file/);
    // And put never writes through the link into the other folder.
    await assert.rejects(files.put(await copyOfSession(log, redis, session)), /not a regular file/);
  });

  it("4. a forged event appended to a file with its digest recomputed but not its summary is refused", async () => {
    const files = await fileArchive();
    const { session } = await finishedSession();
    await files.put(await copyOfSession(log, redis, session));
    editLines(fileOf(files, session), (lines) => {
      const last = JSON.parse(lines.at(-2)!) as Envelope;
      const forged = { ...last, seq: last.seq + 1, kind: "turn.finished" };
      lines.splice(lines.length - 1, 0, JSON.stringify(forged));
      const header = JSON.parse(lines[0]!) as { digest: { count: number; lastSeq: number; sha256: string } };
      header.digest = { count: last.seq + 1, lastSeq: last.seq + 1, sha256: "" };
      lines[0] = JSON.stringify(header);
    });
    // The digest the forger would compute:
    const texts = gunzipSync(readFileSync(fileOf(files, session)))
      .toString("utf8")
      .split("\n")
      .slice(1, -1);
    const { logDigest } = await import("../../src/archive/index.ts");
    const digest = logDigest(texts.map((text) => JSON.parse(text) as Envelope));
    editLines(fileOf(files, session), (lines) => {
      const header = JSON.parse(lines[0]!) as { digest: unknown };
      header.digest = digest;
      lines[0] = JSON.stringify(header);
    });
    await assert.rejects(files.summary(session), /summary .*seq/);
    await log.destroy(session);
    await assert.rejects(restoreSession(log, redis, files, session), ArchiveCorruptError);
    assert.equal((await log.stat(session)).lastSeq, 0, "nothing forged reaches Redis");
  });

  it("5. a summary whose last seq disagrees with its events is refused (file header and SQL row)", async () => {
    const files = await fileArchive();
    const { session } = await finishedSession();
    const copy = await copyOfSession(log, redis, session);
    await files.put(copy);
    await sql.put(copy);
    editLines(fileOf(files, session), (lines) => {
      const header = JSON.parse(lines[0]!) as { summary: { lastSeq: number } };
      header.summary.lastSeq = 1;
      lines[0] = JSON.stringify(header);
    });
    await admin.query(`UPDATE "${schema}".turnstream_sessions SET last_seq = 1 WHERE session = $1`, [session]);
    await log.destroy(session);
    for (const store of [files, sql]) {
      await assert.rejects(store.summary(session), ArchiveCorruptError);
      // The history's stat took its lastSeq from the summary: it must not report the edited figure.
      await assert.rejects(new SessionHistory(log, store).stat(session), ArchiveCorruptError);
    }
  });

  it("6. a label with control, bidi or format characters is refused at enqueue and when read back", async () => {
    for (const value of ["\u202eevil", "a\u001b[2Jb", "x\u0000", "zero\u200bwidth"])
      await assert.rejects(
        producer.enqueueTurn({ prompt: "p", cwd: space.workspace(), labels: { repo: value } }),
        /control or format/,
      );
    const files = await fileArchive();
    const { session } = await finishedSession();
    const copy = await copyOfSession(log, redis, session);
    await files.put(copy);
    await sql.put(copy);
    editLines(fileOf(files, session), (lines) => {
      const header = JSON.parse(lines[0]!) as { summary: { labels: Record<string, string> } };
      header.summary.labels = { repo: "\u001b]0;owned\u0007" };
      lines[0] = JSON.stringify(header);
    });
    await admin.query(
      `UPDATE "${schema}".turnstream_sessions SET labels = '{"repo":"\\u202egnp.exe"}' WHERE session = $1`,
      [session],
    );
    for (const store of [files, sql]) await assert.rejects(store.summary(session), ArchiveCorruptError);
  });

  it("7. a SQL row's state edited (epoch lowered, seq raised) cannot unfence an old writer", async () => {
    const { session, turn, epoch } = await finishedSession();
    await sql.put(await copyOfSession(log, redis, session));
    await admin.query(
      `UPDATE "${schema}".turnstream_sessions
          SET state = jsonb_set(jsonb_set(state, '{meta,epoch}', '"0"'), '{meta,seq}', '"999"') WHERE session = $1`,
      [session],
    );
    const before = await readLog(log, session);
    await log.destroy(session);
    assert.equal(await restoreSession(log, redis, sql, session), "restored");
    const stat = await log.stat(session);
    assert.ok(stat.epoch >= epoch, `epoch ${stat.epoch} fell below the archived events' ${epoch}`);
    assert.equal(stat.lastSeq, before.length, "seq comes from the events, not the row");
    // The writer of that epoch was fenced when a newer attempt began: it stays fenced.
    const { epoch: newer } = await log.beginAttempt(session, turn);
    assert.ok(newer > epoch);
    const late = await log.append(session, epoch, [{ turn, attempt: 1, kind: "cli.stderr", data: { text: "late" } }]);
    assert.equal(late.outcome, "fenced");
    assert.deepEqual((await readLog(log, session)).slice(0, before.length), before);
  });

  it("8. a ?schema= crafted for SQL injection is refused, and the password is never in the message", () => {
    for (const crafted of [
      'x";DROP SCHEMA public CASCADE;--',
      "public;drop table x",
      "Public",
      "a b",
      "x%22%3Bdrop",
      "a".repeat(70),
    ]) {
      const url = `postgres://u:hunter2-secret@127.0.0.1/test?schema=${encodeURIComponent(crafted)}`;
      assert.throws(
        () => openArchive(url),
        (err: Error) => err instanceof InvalidArchiveUrlError && !err.message.includes("hunter2-secret"),
        crafted,
      );
    }
  });

  it("9. an archive URL with a password is refused in argv, and never printed from the environment", async () => {
    const env = { TURNSTREAM_PREFIX: space.logPrefix };
    const inArgv = await turnstream(
      ["sessions", "--archive", `postgres://postgres:hunter2-secret@127.0.0.1:5432/test?schema=${schema}`],
      env,
    );
    assert.notEqual(inArgv.code, 0, inArgv.stderr);
    assert.match(inArgv.stderr, /TURNSTREAM_ARCHIVE|PGPASSWORD/);
    assert.doesNotMatch(inArgv.stderr + inArgv.stdout, /hunter2-secret/);
    // From the environment, a store that does not answer: the error names it without the password.
    const down = await turnstream(["sessions", "--json"], {
      ...env,
      TURNSTREAM_ARCHIVE: "postgres://postgres:hunter2-secret@127.0.0.1:1/test",
    });
    assert.notEqual(down.code, 0);
    assert.doesNotMatch(down.stderr + down.stdout, /hunter2-secret/);
  });

  it("10. retention racing an enqueue: a turn enqueued after the copy keeps the session, and is not lost", async () => {
    const archive = await fileArchive();
    const { session } = await finishedSession();
    let added: string | undefined;
    const report = await retention(archive, async (at, step) => {
      if (at !== session || step !== "verified") return;
      added = (await producer.enqueueTurn({ session, prompt: "again", cwd: space.workspace() })).turn;
    });
    assert.equal((await entryOf(report, session)).action, "kept");
    assert.ok(added);
    assert.equal((await log.stat(session)).exists, true, "the session stays in Redis with its new turn");
    const queued = (await readLog(log, session)).filter((event) => event.kind === "turn.queued");
    assert.equal(queued.length, 2);
  });

  it("11. retention racing an append: an event appended after the copy keeps the session", async () => {
    const archive = await fileArchive();
    const { session, turn } = await finishedSession();
    const report = await retention(archive, async (at, step) => {
      if (at !== session || step !== "verified") return;
      const { epoch, attempt } = await log.beginAttempt(session, turn);
      await log.append(session, epoch, [{ turn, attempt, kind: "cli.stderr", data: { text: "late" } }]);
    });
    const entry = await entryOf(report, session);
    assert.equal(entry.action, "kept");
    assert.match(entry.reason ?? "", /appended/);
    assert.equal((await readLog(log, session)).at(-1)?.kind, "cli.stderr");
  });

  it("12. retention racing a restore: a session a restore is writing back is kept", async () => {
    const archive = await fileArchive();
    const { session } = await finishedSession();
    await redis.hset(log.keys(session).meta, "restoring", new Date().toISOString());
    const entry = await entryOf(await retention(archive), session);
    assert.equal(entry.action, "kept");
    assert.match(entry.reason ?? "", /restore/);
    assert.ok((await readLog(log, session)).length > 0);
    await redis.hdel(log.keys(session).meta, "restoring");
  });

  it("13. two restores and a worker's enqueue racing: the events are written back once", async () => {
    const archive = await fileArchive();
    const { session } = await finishedSession();
    const before = await readLog(log, session);
    await entryOf(await retention(archive), session);
    assert.equal((await log.stat(session)).exists, false);
    const restoring = createProducer({
      redis,
      logPrefix: space.logPrefix,
      queuePrefix: space.queuePrefix,
      restore: archiveRestorer(log, redis, archive),
    });
    try {
      const outcomes = await Promise.all([
        restoreSession(log, redis, archive, session),
        restoreSession(log, redis, archive, session),
        restoring.enqueueTurn({ session, prompt: "after", cwd: space.workspace() }),
      ]);
      assert.equal(outcomes.filter((outcome) => outcome === "restored").length, 1);
    } finally {
      await restoring.close();
    }
    const after = await readLog(log, session);
    assert.deepEqual(after.slice(0, before.length), before, "the archived events once, in order");
    assert.equal(after.length, before.length + 1, "then the new turn's turn.queued");
    assert.equal(after.at(-1)?.kind, "turn.queued");
  });

  it("14. tail and replay of an archived session whose text carries terminal escapes show them escaped", async () => {
    const archive = await fileArchive();
    const { session } = await finishedSession("evil \u001b]0;owned\u0007 \u001b[2J \u202e end");
    await archive.put(await copyOfSession(log, redis, session));
    const live = await turnstream(["tail", session], { TURNSTREAM_PREFIX: space.logPrefix });
    await log.destroy(session);
    const env = { TURNSTREAM_PREFIX: space.logPrefix };
    const url = `file://${archive.dir}`;
    for (const args of [
      ["tail", session],
      ["replay", session],
    ]) {
      const run = await turnstream([...args, "--archive", url], env);
      assert.equal(run.code, 0, run.stderr);
      assert.doesNotMatch(run.stdout, /[\u001b\u0007\u202e]/, `${args[0]} printed a raw escape`);
      if (args[0] === "tail") assert.equal(run.stdout, live.stdout, "shown as the live session was");
    }
  });

  it("15. an imported session archived with its `imported` mark removed still re-runs only in the default mode", async () => {
    const files = await fileArchive();
    const session = uniqueId("imp");
    await importFile(log, session, join(FIXTURES, "today-session.jsonl"));
    const copy = await copyOfSession(log, redis, session);
    assert.ok(copy.state.meta["imported"], "the import marked the session");
    await files.put(copy);
    await log.destroy(session);
    // The state is not covered by the digest: the edit reads back cleanly.
    editLines(fileOf(files, session), (lines) => {
      const header = JSON.parse(lines[0]!) as { state: { meta: Record<string, string> } };
      delete header.state.meta["imported"];
      lines[0] = JSON.stringify(header);
    });
    const history = new SessionHistory(log, files);
    // A recording from the archive reruns only in the default mode, like an imported one.
    const refusedBypass = () =>
      assert.rejects(
        rerunSession({
          redis,
          logPrefix: space.logPrefix,
          history,
          session,
          cwd: space.workspace("rerun"),
          permissionMode: "bypassPermissions",
        }),
        (err: Error) => err instanceof RecordingRefusedError && /came from the archive/.test(err.message),
      );
    assert.equal(await history.importedAt(session), undefined);
    await refusedBypass();
    // Restored into Redis first (an enqueue to it would do so), the mark is still not taken from the archive.
    assert.equal(await restoreSession(log, redis, files, session), "restored");
    assert.equal(await history.importedAt(session), undefined);
    assert.ok(await history.restoredAt(session));
    await refusedBypass();
  });
});
