// Retention: 5,000 finished one-turn sessions (a recorded CLI run each: turn.queued, attempt, CLI
// lines, a ~200 KB session.snapshot, turn.finished, written through the EventLog as a worker writes
// them) archived and removed by runRetention into a file archive (or the archive of --archive, e.g.
// postgres://…). Reports sessions archived per second; Redis `used_memory` after the removal against
// before the sessions were made (goal: within 5%); and replaying one session from the archive against
// replaying it from Redis (goal: ≤ 1.5×), both through the SessionHistory the commands read with.
// Options: --sessions N (default 5000), --snapshot-kb K (default 200), --archive postgres://…?schema=NAME
// (a schema the bench creates and drops; default: a temporary folder), --url redis://… (default: a
// private redis-server).
import { parseArgs } from "node:util";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import {
  FileArchive,
  openArchive,
  PostgresArchive,
  runRetention,
  SessionHistory,
  type Archive,
} from "../src/archive/index.ts";
import { createEventLog, type Envelope, type EventInput, type RedisClient } from "../src/log/index.ts";
import { replaySession } from "../src/projector/index.ts";
import { closeTurnQueue, createTurnQueue } from "../src/queue/index.ts";
import { benchRedis } from "./_redis.ts";
import { median } from "./_stats.ts";

const { values } = parseArgs({
  options: {
    sessions: { type: "string", default: "5000" },
    "snapshot-kb": { type: "string", default: "200" },
    archive: { type: "string" },
    url: { type: "string" },
  },
});
const total = Number(values.sessions);
const snapshotKb = Number(values["snapshot-kb"]);
if (!Number.isSafeInteger(total) || total < 10) throw new Error("--sessions must be an integer ≥ 10");
if (!Number.isSafeInteger(snapshotKb) || snapshotKb < 0) throw new Error("--snapshot-kb must be a whole number");

/** The recorded one-turn run every session repeats (a Bash call by a background subagent, a snapshot). */
const recorded: Envelope[] = readFileSync(
  join(import.meta.dirname, "..", "test", "fixtures", "logs", "background-subagent.jsonl"),
  "utf8",
)
  .split("\n")
  .filter((line) => line !== "")
  .map((line) => JSON.parse(line) as Envelope);

/** A CLI session file of about `kb` KB (JSONL text, as compressible as a real one), base64. */
function sessionFile(kb: number): { base64: string; bytes: number } {
  const lines: string[] = [];
  let size = 0;
  for (let step = 0; size < kb * 1024; step++) {
    const line = `{"type":"assistant","uuid":"u-${step}","message":{"content":[{"type":"text","text":"step ${step}: ran the build, ${step * 7} files changed"}]}}\n`;
    lines.push(line);
    size += line.length;
  }
  const text = lines.join("");
  return { base64: Buffer.from(text).toString("base64"), bytes: Buffer.byteLength(text) };
}

const snapshot = sessionFile(snapshotKb);

/** The session's events as the producer and a worker append them, at times `shiftMs` from the recording. */
function eventsOf(turn: string, shiftMs: number): { queued: EventInput; attempt: EventInput[] } {
  const inputs = recorded.map((env): EventInput => {
    const data =
      env.kind === "session.snapshot"
        ? { ...(env.data as Record<string, unknown>), base64: snapshot.base64, bytes: snapshot.bytes }
        : env.data;
    return {
      turn,
      attempt: env.attempt,
      kind: env.kind,
      data,
      at: new Date(Date.parse(env.at) + shiftMs).toISOString(),
    };
  });
  return { queued: inputs[0]!, attempt: inputs.slice(1) };
}

async function usedMemory(redis: RedisClient): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info("memory"))?.[1]);
}

async function openBenchArchive(url: string | undefined): Promise<{ archive: Archive; dispose(): Promise<void> }> {
  if (url !== undefined) return openBenchPostgres(url);
  const dir = mkdtempSync(join(tmpdir(), "ts-bench-archive-"));
  const archive = new FileArchive(dir);
  await archive.migrate();
  return {
    archive,
    async dispose() {
      await archive.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The archive of a postgres:// URL in a schema of the bench's own (`?schema=`): created by migrate
 * and dropped at the end, so one that exists already is refused rather than dropped with its data.
 */
async function openBenchPostgres(url: string): Promise<{ archive: Archive; dispose(): Promise<void> }> {
  const archive = openArchive(url);
  if (!(archive instanceof PostgresArchive))
    throw new Error("--archive takes a postgres:// URL (default: a temporary folder)");
  const { schema } = archive;
  const server = new URL(url);
  server.searchParams.delete("schema");
  const admin = new pg.Client({ connectionString: server.toString() });
  await admin.connect();
  const dispose = async (): Promise<void> => {
    await archive.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  };
  try {
    const found = await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]);
    if (found.rowCount !== 0)
      throw new Error(`schema ${schema} exists: the bench archives into a schema it creates and drops; name a new one`);
    await archive.migrate();
  } catch (err) {
    await archive.close();
    await admin.end();
    throw err;
  }
  return { archive, dispose };
}

/** Median wall time of `runs` replays of `session` through `history`, milliseconds. */
async function replayMs(history: SessionHistory, session: string, runs: number): Promise<number> {
  const times: number[] = [];
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    const state = await replaySession(history, session);
    times.push(performance.now() - started);
    if (state.lastSeq !== recorded.length) throw new Error(`replay folded ${state.lastSeq} events`);
  }
  return median(times);
}

// The archive first: a refused --archive starts nothing that would need stopping.
const { archive, dispose } = await openBenchArchive(values.archive);
const store = await benchRedis(values.url).catch(async (err: unknown) => {
  await dispose();
  throw err;
});
const { redis } = store;
const prefix = `bench-ret-${process.pid}:`;
const log = createEventLog({ redis, prefix });
const queuePrefix = `{bench-retq-${process.pid}}`;
const queue = createTurnQueue({ redis, queuePrefix });

/** Writes session number `index` as a producer and one worker attempt would. */
async function writeSession(session: string, index: number): Promise<void> {
  const turn = `t-${index}`;
  const { queued, attempt } = eventsOf(turn, Date.now() - 86_400_000 - Date.parse(recorded[0]!.at) + index * 1000);
  await log.appendUnfenced(session, [queued]);
  const begun = await log.beginAttempt(session, turn);
  const outcome = await log.append(session, begun.epoch, attempt, { ackedSeq: begun.lastSeq });
  if (outcome.outcome !== "appended") throw new Error(`append to ${session}: ${outcome.outcome}`);
}

const retain = (): ReturnType<typeof runRetention> =>
  runRetention({ log, redis, queue, archive, olderThanMs: 0, now: Date.now() + 60_000 });

try {
  await queue.waitUntilReady();
  // One session through the whole cycle first: the scripts Redis caches are not the sessions' memory.
  await writeSession("warm-up", 0);
  await retain();
  // Freed memory is counted when Redis gets to it: let it settle before the baseline.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const before = await usedMemory(redis);
  const sessions = Array.from({ length: total }, (_, index) => `ret-${index}`);
  const t0 = performance.now();
  for (let start = 0; start < total; start += 32)
    await Promise.all(
      sessions.slice(start, start + 32).map((session, offset) => writeSession(session, start + offset)),
    );
  const writeS = (performance.now() - t0) / 1000;
  const loaded = await usedMemory(redis);
  process.stdout.write(
    `wrote ${total} sessions of ${recorded.length} events (snapshot ${snapshotKb} KB) in ${writeS.toFixed(1)} s; ` +
      `redis used_memory ${(before / 1e6).toFixed(1)} MB → ${(loaded / 1e6).toFixed(1)} MB\n`,
  );

  const probe = sessions[Math.floor(total / 2)]!;
  const history = new SessionHistory(log, archive);
  await replayMs(history, probe, 3);
  const inRedisMs = await replayMs(history, probe, 15);

  const t1 = performance.now();
  const report = await retain();
  const retentionS = (performance.now() - t1) / 1000;
  const archived = report.sessions.filter((entry) => entry.action === "archived").length;
  if (archived !== total) {
    const other = report.sessions.find((entry) => entry.action !== "archived");
    throw new Error(`archived ${archived} of ${total} sessions; e.g. ${JSON.stringify(other)}`);
  }
  const sessionsPerSec = total / retentionS;
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const after = await usedMemory(redis);
  const memoryRatio = after / before;
  process.stdout.write(
    `runRetention archived and removed ${archived} sessions into ${archive.location} in ${retentionS.toFixed(1)} s ` +
      `= ${sessionsPerSec.toFixed(0)} sessions/s; redis used_memory ${(after / 1e6).toFixed(2)} MB after vs ` +
      `${(before / 1e6).toFixed(2)} MB before the sessions = ${memoryRatio.toFixed(3)}\n`,
  );

  if ((await history.home(probe)) !== "archive") throw new Error(`${probe} is not read from the archive`);
  await replayMs(history, probe, 3);
  const archivedMs = await replayMs(history, probe, 15);
  const replayRatio = archivedMs / inRedisMs;
  process.stdout.write(
    `replay of ${probe} (${recorded.length} events): ${inRedisMs.toFixed(2)} ms from Redis, ` +
      `${archivedMs.toFixed(2)} ms from the archive = ${replayRatio.toFixed(2)}×\n`,
  );
  process.stdout.write(
    `${JSON.stringify({
      bench: "retention",
      sessionsPerSec: Math.round(sessionsPerSec),
      memoryRatio: Number(memoryRatio.toFixed(3)),
      replayRatio: Number(replayRatio.toFixed(2)),
    })}\n`,
  );
} finally {
  await closeTurnQueue(queue);
  await dispose();
  await store.close();
}
