// What each durability level costs: the same ingest (cli.line events through the event log's writer,
// as bench/ingest.ts) at memory, replicas:1 and fsync, in one run on loopback. memory and replicas:1
// run against a private primary with a private replica attached (so both pay the same replication
// stream; only replicas:1 waits for it); fsync against a private server with appendonly yes and
// appendfsync always (on Redis 7.2+ WAITAOF confirms each batch instead). Ratios are against memory.
// Options: --events N (default 200000), --batch N (default 1024).
import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import {
  connectRedis,
  createEventLog,
  createWriter,
  parseDurability,
  type Durability,
  type RedisClient,
} from "../src/log/index.ts";
import { startRedisServer, type RedisServer } from "../test/support/redis-server.ts";
import { textSource } from "./_text.ts";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "200000" },
    batch: { type: "string", default: "1024" },
  },
});
const total = Number(values.events);
const batchEvents = Number(values.batch);

const { rand, text } = textSource(0x9e3779b9);
// Short assistant lines and mid-size tool results, as a CLI prints them.
const lines = Array.from({ length: total }, (_, index) =>
  rand() < 0.5
    ? JSON.stringify({
        type: "assistant",
        message: {
          id: `msg_${index}`,
          role: "assistant",
          content: [{ type: "text", text: text(300 + Math.floor(rand() * 500)) }],
        },
      })
    : JSON.stringify({
        type: "user",
        message: {
          role: "user",
          content: [
            { tool_use_id: `toolu_${index}`, type: "tool_result", content: text(800 + Math.floor(rand() * 1200)) },
          ],
        },
      }),
);

async function ingest(redis: RedisClient, durability: Durability, items: readonly string[]): Promise<number> {
  const log = createEventLog({ redis, prefix: `bench:${randomBytes(4).toString("hex")}:`, durability });
  await log.checkDurability();
  const session = `bench-${randomBytes(4).toString("hex")}`;
  const t0 = performance.now();
  const { epoch, attempt } = await log.beginAttempt(session, "turn-1");
  const writer = createWriter({ log, session, epoch, maxBatchEvents: batchEvents, maxBatchBytes: 4 * 1024 * 1024 });
  for (const raw of items) await writer.write({ turn: "turn-1", attempt, kind: "cli.line", data: { raw } });
  const last = await writer.close();
  const ms = performance.now() - t0;
  if (last !== items.length) throw new Error(`log has ${last} events, expected ${items.length}`);
  await log.destroy(session);
  return ms;
}

async function inSync(replica: RedisServer): Promise<void> {
  const client = new Redis(replica.url);
  try {
    const until = Date.now() + 15000;
    while (!(await client.info("replication")).includes("master_link_status:up")) {
      if (Date.now() > until) throw new Error("the bench replica did not sync");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    client.disconnect();
  }
}

const primary = await startRedisServer();
const replica = await startRedisServer({ args: ["--replicaof", "127.0.0.1", String(primary.port)] });
const aof = await startRedisServer({ args: ["--appendonly", "yes", "--appendfsync", "always"] });
const replicated = connectRedis({ url: primary.url, env: {} });
const fsynced = connectRedis({ url: aof.url, env: {} });
try {
  await inSync(replica);
  const priming = lines.slice(0, 5000);
  const levels: [string, RedisClient, Durability][] = [
    ["memory", replicated, parseDurability("memory")],
    ["replicas:1", replicated, parseDurability("replicas:1")],
    ["fsync", fsynced, parseDurability("fsync")],
  ];
  for (const [, redis, durability] of levels) await ingest(redis, durability, priming);
  const rates: Record<string, number> = {};
  for (const [name, redis, durability] of levels) {
    const ms = await ingest(redis, durability, lines);
    rates[name] = Math.round(total / (ms / 1000));
    process.stdout.write(`${name.padEnd(11)} ${ms.toFixed(0).padStart(7)} ms  ${rates[name]}/s\n`);
  }
  const memory = rates["memory"]!;
  process.stdout.write(
    JSON.stringify({
      bench: "durability",
      replicasRatio: Number((rates["replicas:1"]! / memory).toFixed(3)),
      fsyncRatio: Number((rates["fsync"]! / memory).toFixed(3)),
      memoryPerSec: memory,
      replicasPerSec: rates["replicas:1"],
      fsyncPerSec: rates["fsync"],
      events: total,
      batch: batchEvents,
    }) + "\n",
  );
} finally {
  replicated.disconnect();
  fsynced.disconnect();
  await Promise.all([primary.dispose(), replica.dispose(), aof.dispose()]);
}
