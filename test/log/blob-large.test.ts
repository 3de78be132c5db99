// A 100 MB CLI line through the writer into a blob and back, with the process's memory growth
// measured against the line's size.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { connectRedis, createEventLog, createWriter, type RedisClient } from "../../src/log/index.ts";
import { startRedisServer, type RedisServer } from "../support/redis-server.ts";
import { rid } from "./contract.ts";

describe("large payloads", () => {
  let server: RedisServer;
  let redis: RedisClient;

  before(async () => {
    // A private server: 100 MB of test data never lands in the shared Redis.
    server = await startRedisServer();
    redis = connectRedis({ url: server.url, env: {} });
  });
  after(async () => {
    redis.disconnect();
    await server.dispose();
  });

  it("a 100 MB line round-trips exactly with memory bounded to a small multiple of the line", async (context) => {
    const log = createEventLog({ redis, prefix: `test:${rid()}:` });
    const sessionId = `s-${rid()}`;
    const size = 100 * 1024 * 1024;
    let peak = 0;
    const sample = (): void => {
      peak = Math.max(peak, process.memoryUsage().rss);
    };
    const sampler = setInterval(sample, 5);
    context.after(() => clearInterval(sampler));

    const head = '{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"';
    const tail = '"}]},"session_id":"x"}';
    // Built through a buffer so the string is flat: a concatenation is a rope that V8 flattens (one
    // more 100 MB copy) on first use, inside the write path, which then counted the caller's copy.
    const raw = Buffer.from(
      head + 'ab\\"cd  '.repeat(size / 8).slice(0, size - head.length - tail.length) + tail,
      "latin1",
    ).toString("latin1");
    assert.equal(raw.length, size);
    // Growth is measured from here: the line is the caller's, only what the log adds on top counts;
    // the pieces it was built from are collected first, so their release cannot hide any growth.
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    gc();
    gc();
    const base = process.memoryUsage().rss;
    peak = base;

    const { epoch, attempt } = await log.beginAttempt(sessionId, "t1");
    const writer = createWriter({ log, session: sessionId, epoch });
    await writer.write({ turn: "t1", attempt, kind: "cli.line", data: { raw: "before" } });
    await writer.write({ turn: "t1", attempt, kind: "cli.line", data: { raw } });
    await writer.write({ turn: "t1", attempt, kind: "cli.line", data: { raw: "after" } });
    assert.equal(await writer.close(), 3);
    sample();
    const afterWrite = peak;

    const keys = log.keys(sessionId);
    assert.equal(await redis.scard(keys.blobs), 1);
    const entry = await redis.xrange(keys.events, "0-2", "0-2");
    assert.ok(entry[0]![1].join("").length < 500, "the stream entry is a reference");

    const got: string[] = [];
    for await (const event of log.read(sessionId)) got.push((event.data as { raw: string }).raw);
    clearInterval(sampler);
    sample();
    assert.equal(got.length, 3);
    assert.equal(got[0], "before");
    assert.equal(got[2], "after");
    assert.ok(got[1] === raw, "the 100 MB line is byte-for-byte the same");

    const writeGrowth = (afterWrite - base) / size;
    const totalGrowth = (peak - base) / size;
    context.diagnostic(
      `RSS growth: write ${writeGrowth.toFixed(2)}x, write+read ${totalGrowth.toFixed(2)}x the line (${size} B)`,
    );
    // A copy of the line when encoding/sending (plus the reply buffer and the string on read).
    assert.ok(writeGrowth < 3, `write path grew RSS by ${writeGrowth.toFixed(2)}x the line`);
    assert.ok(totalGrowth < 4.5, `write+read grew RSS by ${totalGrowth.toFixed(2)}x the line`);
    await log.destroy(sessionId);
  });
});
