// `turnstream retention`, `turnstream archive migrate` and the projector's periodic retention against
// a real Redis, a file archive and PostgreSQL; and the race retention can open against an enqueue: a
// session removed between the producer's restore and its register step is restored again, so the
// turn lands on the archived history, not on a fresh log at seq 1.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { archiveRestorer, FileArchive, restoreSession, runRetention } from "../../src/archive/index.ts";
import { createEventLog, type Envelope, type EventLog, type RedisClient } from "../../src/log/index.ts";
import { createProducer, type Producer } from "../../src/queue/index.ts";
import { cleanupKeys, NODE, redisFor, testSpace, type TestSpace } from "../worker/_support.ts";
import { BIN, onlyJson, turnstream } from "./_cli.ts";

interface Rig {
  space: TestSpace;
  redis: RedisClient;
  producer: Producer;
  log: EventLog;
  archiveDir: string;
  archiveUrl: string;
  /** The env of a command on this rig's keys. */
  env: Record<string, string>;
  close(): Promise<void>;
}

function rig(): Rig {
  const space = testSpace();
  const redis = redisFor();
  const { logPrefix, queuePrefix } = space;
  const producer = createProducer({ redis, logPrefix, queuePrefix });
  const archiveDir = `${space.root}/archive`;
  return {
    space,
    redis,
    producer,
    log: createEventLog({ redis, prefix: logPrefix }),
    archiveDir,
    archiveUrl: pathToFileURL(archiveDir).href,
    env: { TURNSTREAM_PREFIX: logPrefix, TURNSTREAM_QUEUE_PREFIX: queuePrefix, TURNSTREAM_ARCHIVE: "" },
    async close() {
      await producer.close();
      await cleanupKeys(redis, space);
      redis.disconnect();
      space.cleanup();
    },
  };
}

/** A session with one turn run to its end the way a worker runs it. */
async function finishedSession(stage: Rig, producer = stage.producer): Promise<{ session: string; lastSeq: number }> {
  const cwd = stage.space.workspace();
  const { session, turn } = await producer.enqueueTurn({ prompt: "hello", cwd, idempotencyKey: randomUUID() });
  const token = randomUUID();
  assert.equal((await producer.order.acquire(session, turn, token, 30_000)).status, "ok");
  const { epoch, attempt } = await stage.log.beginAttempt(session, turn);
  const appended = await stage.log.append(session, epoch, [
    { turn, attempt, kind: "attempt.started", data: { worker: "w1" } },
    { turn, attempt, kind: "turn.finished", data: { attempt, cliSessionId: "cli-1" } },
  ]);
  await producer.order.finish(session, turn, token);
  await sleep(5);
  return { session, lastSeq: appended.lastSeq };
}

async function present(stage: Rig, session: string): Promise<boolean> {
  return (await stage.redis.exists(stage.log.keys(session).meta)) === 1;
}

async function archived(stage: Rig, session: string): Promise<boolean> {
  const archive = new FileArchive(stage.archiveDir);
  try {
    return (await archive.digest(session)) !== undefined;
  } catch {
    return false;
  } finally {
    await archive.close();
  }
}

test("retention --dry-run changes nothing; a real run archives and removes; --json is one report", async () => {
  const stage = rig();
  try {
    const { session, lastSeq } = await finishedSession(stage);
    const archive = ["--archive", stage.archiveUrl, "--older-than", "1ms"];
    assert.equal((await turnstream(["archive", "migrate", "--archive", stage.archiveUrl])).code, 0);
    const dry = await turnstream(["retention", ...archive, "--dry-run"], stage.env);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, new RegExp(`would be archived +${session} \\(seq ${lastSeq}\\)`));
    assert.match(dry.stdout, /retention \(dry run\): 1 archived/);
    assert.ok(await present(stage, session), "a dry run leaves the session in Redis");
    assert.equal(await archived(stage, session), false, "a dry run writes nothing to the archive");

    const real = await turnstream(["retention", ...archive, "--json"], stage.env);
    assert.equal(real.code, 0, real.stderr);
    const report = onlyJson(real.stdout);
    assert.deepEqual(report, {
      dryRun: false,
      olderThanMs: 1,
      archive: report["archive"],
      sessions: [{ session, action: "archived", lastSeq }],
    });
    assert.match(String(report["archive"]), /archive/);
    assert.equal(await present(stage, session), false, "the session left Redis");
    assert.ok(await archived(stage, session), "its history is in the archive");

    const again = await turnstream(["retention", ...archive], stage.env);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /retention: no sessions idle over/);
  } finally {
    await stage.close();
  }
});

test("retention with no archive removes nothing and names TURNSTREAM_ARCHIVE and --discard-history", async () => {
  const stage = rig();
  try {
    const { session } = await finishedSession(stage);
    const kept = await turnstream(["retention", "--older-than", "1ms"], stage.env);
    assert.equal(kept.code, 0, kept.stderr);
    assert.match(kept.stderr, /nothing removed/);
    assert.match(kept.stderr, /TURNSTREAM_ARCHIVE/);
    assert.match(kept.stderr, /--discard-history/);
    assert.match(kept.stdout, new RegExp(`kept +${session}`));
    assert.ok(await present(stage, session));

    const discarded = await turnstream(["retention", "--older-than", "1ms", "--discard-history"], stage.env);
    assert.equal(discarded.code, 0, discarded.stderr);
    assert.match(discarded.stdout, new RegExp(`removed +${session}`));
    assert.equal(await present(stage, session), false);
  } finally {
    await stage.close();
  }
});

test("retention refuses a malformed age with exit 2", async () => {
  const bad = await turnstream(["retention", "--older-than", "soon"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--older-than takes a duration such as 12h or 7d, got 'soon'/);
  const badEnv = await turnstream(["retention"], { TURNSTREAM_RETENTION: "-3d" });
  assert.equal(badEnv.code, 2);
  assert.match(badEnv.stderr, /TURNSTREAM_RETENTION takes a duration/);
});

test("archive migrate: a file archive's folder is made once; PostgreSQL twice is a no-op the second time", async () => {
  const space = testSpace();
  const schema = `tcli_${randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: "postgres://postgres@127.0.0.1:5432/test" });
  await admin.connect();
  try {
    const folder = pathToFileURL(`${space.root}/store`).href;
    const first = await turnstream(["archive", "migrate", "--archive", folder]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /applied create directory/);
    const second = await turnstream(["archive", "migrate"], { TURNSTREAM_ARCHIVE: folder });
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /nothing applied/);

    // A password in the URL is never printed: the archive's location is.
    const url = `postgres://postgres:hunter2-secret@127.0.0.1:5432/test?schema=${schema}`;
    const created = await turnstream(["archive", "migrate", "--json"], { TURNSTREAM_ARCHIVE: url });
    assert.equal(created.code, 0, created.stderr);
    const applied = onlyJson(created.stdout)["applied"] as string[];
    assert.ok(applied.length > 0, created.stdout);
    const noop = await turnstream(["archive", "migrate"], { TURNSTREAM_ARCHIVE: url });
    assert.equal(noop.code, 0, noop.stderr);
    assert.match(noop.stdout, /up to date, nothing applied/);
    // In argv, where anyone on the machine can read it, a password is refused.
    const inArgv = await turnstream(["archive", "migrate", "--archive", url]);
    assert.equal(inArgv.code, 2);
    assert.match(inArgv.stderr, /TURNSTREAM_ARCHIVE/);
    for (const said of [created, noop, inArgv]) assert.doesNotMatch(said.stdout + said.stderr, /hunter2/);
    const tables = await admin.query(
      "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1",
      [schema],
    );
    assert.ok(tables.rows[0].n > 0, "the schema holds the archive's tables");

    const notAStore = await turnstream(["retention", "--archive", "ftp://operator:hunter2-secret@host/dir"]);
    assert.equal(notAStore.code, 2);
    assert.match(notAStore.stderr, /ftp is not an archive store/);
    assert.doesNotMatch(notAStore.stderr, /hunter2/);

    const none = await turnstream(["archive", "migrate"], { TURNSTREAM_ARCHIVE: "" });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /TURNSTREAM_ARCHIVE/);
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    space.cleanup();
  }
});

test("retention removing the session between the restore check and the register: the turn lands on the restored history", async () => {
  const stage = rig();
  const archive = new FileArchive(stage.archiveDir);
  await archive.migrate();
  const restorer = archiveRestorer(stage.log, stage.redis, archive);
  let raced = 0;
  const racing = createProducer({
    redis: stage.redis,
    logPrefix: stage.space.logPrefix,
    queuePrefix: stage.space.queuePrefix,
    // The restore finds the session in Redis; retention removes it before the register step runs.
    restore: async (session) => {
      const found = await restorer(session);
      if (raced++ === 0) {
        const report = await runRetention({
          log: stage.log,
          redis: stage.redis,
          queue: stage.producer.queue,
          archive,
          olderThanMs: 1,
        });
        assert.deepEqual(
          report.sessions.map((entry) => entry.action),
          ["archived"],
        );
      }
      return found;
    },
  });
  try {
    const { session, lastSeq } = await finishedSession(stage);
    const turn = await racing.enqueueTurn({ prompt: "again", cwd: stage.space.workspace(), session });
    assert.equal(raced, 2, "the register refused once and the restore ran again");
    assert.equal(turn.queuedSeq, lastSeq + 1, "the turn follows the archived history");
    const events: Envelope[] = [];
    for await (const event of stage.log.read(session)) events.push(event);
    assert.deepEqual(
      events.map((event) => event.seq),
      Array.from({ length: lastSeq + 1 }, (_, index) => index + 1),
    );
    assert.equal(events[0]?.kind, "turn.queued");
    assert.equal(await restoreSession(stage.log, stage.redis, archive, session), "present");

    // The refused register writes nothing: no pending list, registered id or setting of a gone session.
    const gone = "s-gone-" + randomBytes(4).toString("hex");
    const refused = await racing.order.register(gone, "t_refused000001", {
      onLostSession: "restore",
      warm: true,
      expectSession: true,
    });
    assert.deepEqual(refused, { created: false, warm: false, gone: true, tenantConflict: false });
    assert.deepEqual(await stage.redis.keys(`${stage.space.logPrefix}{s:${gone}}*`), []);
  } finally {
    await racing.close();
    await archive.close();
    await stage.close();
  }
});

const PROJECTORS: Record<string, string[]> = {
  "turnstream projector": [BIN, "projector", "--rescan-ms", "200"],
  "workers/projector.ts": [join(process.cwd(), "workers", "projector.ts")],
};

for (const [entry, args] of Object.entries(PROJECTORS))
  test(`${entry} with TURNSTREAM_RETENTION_INTERVAL archives an idle ended session and stops on SIGTERM`, async () => {
    const stage = rig();
    const archive = new FileArchive(stage.archiveDir);
    await archive.migrate();
    await archive.close();
    try {
      const { session } = await finishedSession(stage);
      const child = spawn(NODE, args, {
        env: {
          ...process.env,
          ...stage.env,
          TURNSTREAM_ARCHIVE: stage.archiveUrl,
          TURNSTREAM_RETENTION: "1ms",
          TURNSTREAM_RETENTION_INTERVAL: "300ms",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let said = "";
      child.stdout.on("data", (chunk: Buffer) => (said += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (said += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      const deadline = Date.now() + 30_000;
      while ((await present(stage, session)) && Date.now() < deadline) await sleep(100);
      assert.equal(await present(stage, session), false, `the projector's retention removed the session\n${said}`);
      assert.ok(await archived(stage, session));
      child.kill("SIGTERM");
      assert.equal(await exited, 0, said);
      assert.match(said, /"msg":"retention ran"/);
      assert.match(said, /"archived":1/);
    } finally {
      await stage.close();
    }
  });

test("a projector process with a PostgreSQL archive keeps each live session's summary row current", async () => {
  const stage = rig();
  const schema = `tlive_${randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: "postgres://postgres@127.0.0.1:5432/test" });
  await admin.connect();
  const url = `postgres://postgres@127.0.0.1:5432/test?schema=${schema}`;
  const child = spawn(NODE, PROJECTORS["workers/projector.ts"]!, {
    env: { ...process.env, ...stage.env, TURNSTREAM_ARCHIVE: url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let said = "";
  child.stdout.on("data", (chunk: Buffer) => (said += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (said += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const row = async (session: string): Promise<Record<string, unknown> | undefined> => {
    const rows = await admin
      .query(
        `SELECT status, turns, last_seq::int AS last_seq, archived FROM "${schema}".turnstream_sessions WHERE session = $1`,
        [session],
      )
      .catch(() => ({ rows: [] as Record<string, unknown>[] }));
    return rows.rows[0];
  };
  const rowAt = async (session: string, lastSeq: number): Promise<Record<string, unknown>> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const found = await row(session);
      if (found !== undefined && Number(found["last_seq"]) === lastSeq) return found;
      if (Date.now() > deadline) throw new Error(`no row at seq ${lastSeq}: ${JSON.stringify(found)}\n${said}`);
      await sleep(100);
    }
  };
  try {
    await turnstream(["archive", "migrate", "--archive", url], stage.env);
    const { session, lastSeq } = await finishedSession(stage);
    assert.deepEqual(await rowAt(session, lastSeq), {
      status: "finished",
      turns: 1,
      last_seq: lastSeq,
      archived: false,
    });
    // A second turn: the row follows the session.
    const queued = await stage.producer.enqueueTurn({ prompt: "again", cwd: stage.space.workspace(), session });
    const events = await readAllOf(stage.log, session);
    assert.equal(events.at(-1)!.turn, queued.turn);
    const moved = await rowAt(session, events.length);
    assert.deepEqual(moved, { status: "queued", turns: 2, last_seq: events.length, archived: false });
    child.kill("SIGTERM");
    assert.equal(await exited, 0, said);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    await stage.close();
  }
});

async function readAllOf(log: EventLog, session: string): Promise<Envelope[]> {
  const events: Envelope[] = [];
  for await (const event of log.read(session)) events.push(event);
  return events;
}

test("turnstream run with an archive restores an archived session: the turn follows its history", async () => {
  const stage = rig();
  try {
    const { session, lastSeq } = await finishedSession(stage);
    const archive = ["--archive", stage.archiveUrl];
    assert.equal((await turnstream(["archive", "migrate", ...archive])).code, 0);
    const moved = await turnstream(["retention", ...archive, "--older-than", "1ms"], stage.env);
    assert.match(moved.stdout, new RegExp(`archived +${session}`));
    assert.equal(await present(stage, session), false);

    const queued = await turnstream(
      ["run", "--session", session, "--cwd", stage.space.workspace(), "--json", ...archive, "--", "again"],
      stage.env,
    );
    assert.equal(queued.code, 0, queued.stderr);
    assert.equal(onlyJson(queued.stdout)["queuedSeq"], lastSeq + 1);
    const kinds: string[] = [];
    for await (const event of stage.log.read(session)) kinds.push(event.kind);
    assert.equal(kinds.length, lastSeq + 1);
    assert.deepEqual([kinds[0], kinds.at(-1)], ["turn.queued", "turn.queued"]);
  } finally {
    await stage.close();
  }
});
