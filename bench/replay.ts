// Rebuild throughput: the live projector rebuilding a 1,000,000-event session from zero (log.read
// with envelope validation, every CLI line parsed, all read models folded, state + checkpoint
// committed to Redis) against bare XRANGE paging + JSON.parse of every stored JSON value (envelope
// and raw line) of the same stream, same run, same Redis. Ratio = rebuild rate / bare rate.
// The session is made of the recorded CLI fixture runs (test/fixtures/logs), repeated as turns,
// loaded with pipelined XADD (same entry layout the log's Lua append writes), deleted after.
// Options: --events N (default 1000000), --url redis://… (default: a private redis-server).
import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createEventLog, type Envelope } from "../src/log/index.ts";
import { SessionProjection } from "../src/projector/index.ts";
import { benchRedis } from "./_redis.ts";

const { values } = parseArgs({ options: { events: { type: "string", default: "1000000" }, url: { type: "string" } } });
const total = Number(values.events);
if (!Number.isSafeInteger(total) || total < 1000) throw new Error("--events must be an integer ≥ 1000");

const logsDir = join(import.meta.dirname, "..", "test", "fixtures", "logs");
const runs: Envelope[][] = readdirSync(logsDir)
  .filter((f) => f.endsWith(".jsonl"))
  .sort()
  .map((file) =>
    readFileSync(join(logsDir, file), "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as Envelope),
  );

const store = await benchRedis(values.url);
const { redis } = store;
const prefix = `bench-${randomBytes(4).toString("hex")}:`;
const session = "replay-bench";
const log = createEventLog({ redis, prefix });
const sessionKeys = log.keys(session);

try {
  // ---- load ----
  const t0 = performance.now();
  let seq = 0;
  let epoch = 0;
  let turnNo = 0;
  let pipe = redis.pipeline();
  let inPipe = 0;
  outer: for (;;) {
    for (const run of runs) {
      turnNo++;
      const epochBase = epoch;
      for (const runEnvelope of run) {
        if (seq === total) break outer;
        seq++;
        const ep = runEnvelope.epoch === 0 ? 0 : epochBase + runEnvelope.epoch;
        epoch = Math.max(epoch, ep);
        const enc = log.encode(session, ep, {
          turn: `${runEnvelope.turn}-${turnNo}`,
          attempt: runEnvelope.attempt,
          kind: runEnvelope.kind,
          data: runEnvelope.data,
          at: runEnvelope.at,
        });
        if (enc.raw === undefined) pipe.xadd(sessionKeys.events, `0-${seq}`, "e", enc.env);
        else pipe.xadd(sessionKeys.events, `0-${seq}`, "e", enc.env, "r", enc.raw);
        if (++inPipe === 5000) {
          await pipe.exec();
          pipe = redis.pipeline();
          inPipe = 0;
        }
      }
    }
  }
  pipe.hset(sessionKeys.meta, "seq", seq, "epoch", epoch, "lastId", `0-${seq}`);
  await pipe.exec();
  const loadS = (performance.now() - t0) / 1000;
  const mem = (await redis.info("memory")).match(/used_memory_human:(\S+)/)?.[1];
  process.stdout.write(`loaded ${seq} events in ${loadS.toFixed(1)} s (redis memory ${mem})\n`);

  // ---- bare: XRANGE paging + JSON.parse ----
  const t1 = performance.now();
  let bare = 0;
  let from = "0-1";
  for (;;) {
    const page = (await redis.xrange(sessionKeys.events, from, "+", "COUNT", 1000)) as [string, string[]][];
    for (const [, fields] of page) {
      for (let fieldIndex = 1; fieldIndex < fields.length; fieldIndex += 2) {
        try {
          JSON.parse(fields[fieldIndex]!);
        } catch {
          // a recorded non-JSON line: the projector counts it, the bare loop just moves on
        }
      }
      bare++;
    }
    if (page.length < 1000) break;
    const last = page[page.length - 1]![0];
    from = `0-${Number(last.slice(2)) + 1}`;
  }
  const bareS = (performance.now() - t1) / 1000;
  const bareRate = bare / bareS;
  process.stdout.write(
    `bare XRANGE + JSON.parse: ${bare} events in ${bareS.toFixed(2)} s = ${Math.round(bareRate)} events/s\n`,
  );

  if (process.env["BENCH_PHASES"]) {
    const ta = performance.now();
    let count = 0;
    for await (const readEnvelope of log.read(session, { pageSize: 1000 })) count += readEnvelope.seq > 0 ? 1 : 0;
    process.stdout.write(`log.read only: ${((performance.now() - ta) / 1000).toFixed(2)} s\n`);
    const { foldAsync } = await import("../src/projector/index.ts");
    const tb = performance.now();
    await foldAsync(log.read(session, { pageSize: 1000 }));
    process.stdout.write(`log.read + fold: ${((performance.now() - tb) / 1000).toFixed(2)} s\n`);
  }

  // ---- rebuild: the live projector from zero ----
  const t2 = performance.now();
  const proj = new SessionProjection({ log, session, version: 1, batchEvents: 1_000_000, maxBatchMs: 5000 });
  await proj.catchUp();
  const rebuildS = (performance.now() - t2) / 1000;
  const rebuildRate = proj.checkpoint / rebuildS;
  const st = proj.state!;
  process.stdout.write(
    `projector rebuild: ${proj.checkpoint} events in ${rebuildS.toFixed(2)} s = ${Math.round(rebuildRate)} events/s ` +
      `(${st.view.turns.length} turns, ${st.decisions.outcomes.length} decision outcomes)\n`,
  );
  if (proj.checkpoint !== seq) throw new Error(`rebuild stopped at ${proj.checkpoint} of ${seq}`);
  const ratio = rebuildRate / bareRate;
  process.stdout.write(
    JSON.stringify({
      bench: "replay",
      events: seq,
      eventsPerSec: Math.round(rebuildRate),
      bareEventsPerSec: Math.round(bareRate),
      ratio: Number(ratio.toFixed(3)),
      goal: 0.5,
      rebuildSeconds: Number(rebuildS.toFixed(2)),
    }) + "\n",
  );
} finally {
  // Delete in pieces: one DEL of a 1M-entry stream would block a shared Redis.
  const keys = await redis.keys(`${prefix}*`);
  for (const key of keys) {
    if (key === sessionKeys.events) {
      for (;;) {
        const ids = (await redis.xrange(key, "-", "+", "COUNT", 10000)).map(([id]) => id);
        if (ids.length === 0) break;
        await redis.xdel(key, ...ids);
      }
    }
    await redis.del(key);
  }
  await store.close();
}
