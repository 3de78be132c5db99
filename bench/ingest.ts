// Ingest throughput: 200,000 realistic cli.line events through the event log's writer (Lua append,
// fenced, idempotent, batched) against raw pipelined XADD of the same line payloads to a plain
// stream, in the same run against the same Redis. Ratio = log rate / raw rate.
// Options: --events N, --url redis://… (default: a private redis-server started for the run, so
// other users of a shared Redis neither disturb the figures nor get 1 GB of bench data).
import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import { createEventLog, createWriter } from "../src/log/index.ts";
import { benchRedis } from "./_redis.ts";
import { textSource } from "./_text.ts";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "200000" },
    url: { type: "string" },
    batch: { type: "string", default: "1024" },
  },
});
const total = Number(values.events);
const batchEvents = Number(values.batch);

// Deterministic pseudo-random sizes so runs are comparable.
const { rand, text } = textSource(0x9e3779b9);
const sessionId = "4f1c2b9e-8d7a-4e6b-9c3d-2a1b0f9e8d7c";
// Mix modelled on stream-json output: many short tool/assistant lines, some mid, a few large results.
function line(index: number): string {
  const roll = rand();
  const size =
    roll < 0.5
      ? 300 + Math.floor(rand() * 500)
      : roll < 0.85
        ? 800 + Math.floor(rand() * 1200)
        : 2000 + Math.floor(rand() * 2096);
  const id = `msg_${index.toString(36).padStart(8, "0")}`;
  if (roll < 0.5) {
    return JSON.stringify({
      type: "assistant",
      message: {
        id,
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4-5",
        content: [{ type: "text", text: text(size - 260) }],
        stop_reason: null,
        usage: { input_tokens: 3, output_tokens: 12 },
      },
      parent_tool_use_id: null,
      session_id: sessionId,
    });
  }
  return JSON.stringify({
    type: "user",
    message: {
      role: "user",
      content: [{ tool_use_id: `toolu_${index}`, type: "tool_result", content: text(size - 200) }],
    },
    parent_tool_use_id: null,
    session_id: sessionId,
    tool_use_result: { stdout: "", stderr: "", interrupted: false },
  });
}

const lines = Array.from({ length: total }, (_, i) => line(i));
const lineBytes = lines.reduce((a, l) => a + Buffer.byteLength(l), 0);

const store = await benchRedis(values.url);
const { redis } = store;
const prefix = `bench:${randomBytes(4).toString("hex")}:`;
const log = createEventLog({ redis, prefix });
const rawKey = `${prefix}raw-stream`;
const session = `bench-${randomBytes(4).toString("hex")}`;

async function rawRun(key: string, items: string[]): Promise<number> {
  const t0 = performance.now();
  for (let start = 0; start < items.length; start += 1000) {
    const pipeline = redis.pipeline();
    for (const item of items.slice(start, start + 1000)) pipeline.xadd(key, "*", "r", item);
    await pipeline.exec();
  }
  return performance.now() - t0;
}

async function logRun(sess: string, items: string[]): Promise<number> {
  const t0 = performance.now();
  const { epoch, attempt } = await log.beginAttempt(sess, "turn-1");
  const writer = createWriter({
    log,
    session: sess,
    epoch,
    maxBatchEvents: batchEvents,
    maxBatchBytes: 4 * 1024 * 1024,
  });
  for (const raw of items) await writer.write({ turn: "turn-1", attempt, kind: "cli.line", data: { raw } });
  await writer.close();
  return performance.now() - t0;
}

try {
  // Priming (JIT, script load) on small throwaway keys.
  const priming = lines.slice(0, 5000);
  await rawRun(`${prefix}priming-raw`, priming);
  await logRun(`${session}-priming`, priming);
  await redis.del(`${prefix}priming-raw`);
  await log.destroy(`${session}-priming`);

  const rawMs = await rawRun(rawKey, lines);
  const logMs = await logRun(session, lines);
  const keys = log.keys(session);
  const [streamBytes, metaBytes, rawBytes] = await Promise.all([
    redis.call("MEMORY", "USAGE", keys.events, "SAMPLES", "0") as Promise<number>,
    redis.call("MEMORY", "USAGE", keys.meta, "SAMPLES", "0") as Promise<number>,
    redis.call("MEMORY", "USAGE", rawKey, "SAMPLES", "0") as Promise<number>,
  ]);
  const stat = await log.stat(session);
  if (stat.lastSeq !== total) throw new Error(`log has ${stat.lastSeq} events, expected ${total}`);
  const eventsPerSec = Math.round(total / (logMs / 1000));
  const rawPerSec = Math.round(total / (rawMs / 1000));
  const bytesPerEvent = Math.round((streamBytes + metaBytes) / total);
  process.stdout.write(
    `events ${total}, mean line ${Math.round(lineBytes / total)} B, batch ${batchEvents}\n` +
      `log  ${logMs.toFixed(0)} ms  ${eventsPerSec}/s  ${bytesPerEvent} B/event\n` +
      `raw  ${rawMs.toFixed(0)} ms  ${rawPerSec}/s  ${Math.round(rawBytes / total)} B/event\n`,
  );
  await redis.del(rawKey);
  await log.destroy(session);
  process.stdout.write(
    JSON.stringify({
      bench: "ingest",
      eventsPerSec,
      rawPerSec,
      ratio: Number((eventsPerSec / rawPerSec).toFixed(3)),
      bytesPerEvent,
      rawBytesPerEvent: Math.round(rawBytes / total),
      events: total,
    }) + "\n",
  );
} finally {
  await store.close();
}
