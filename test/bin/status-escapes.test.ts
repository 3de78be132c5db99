// `status` and `sessions` print what others wrote to Redis: a worker registry entry whose host and
// name carry terminal escapes and a bidi override, written as a Redis writer would, is shown with
// those as visible escapes, never raw.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { connectRedis } from "../../src/log/index.ts";
import { registryKeys } from "../../src/worker/registry.ts";
import { turnstream } from "./_cli.ts";

test("status shows a forged registry entry's escapes and bidi characters as visible text", async () => {
  const redis = connectRedis({ env: {} });
  const prefix = `tesc${randomBytes(4).toString("hex")}:`;
  const keys = registryKeys(prefix);
  try {
    const id = "inst-1";
    const now = new Date().toISOString();
    await redis.hset(keys.entry(id), {
      id,
      worker: "w\u001b[2J\u001b[Hclean",
      host: "h\u202eost",
      pid: "1",
      slotsBusy: "0",
      slotsTotal: "1",
      warmKept: "0",
      startedAt: now,
      beatAt: now,
      version: "1",
      boot: "b",
    });
    await redis.zadd(keys.live, Date.now() + 60_000, id);
    const out = await turnstream(["status"], { TURNSTREAM_PREFIX: prefix, TURNSTREAM_QUEUE_PREFIX: `{${prefix}q}` });
    assert.equal(out.code, 0, out.stderr);
    assert.doesNotMatch(out.stdout, /[\u001b\u202e]/, "no raw escape or bidi character");
    assert.ok(out.stdout.includes("inst-1 (w\\x1b[2J\\x1b[Hclean, host h\\u202eost, pid 1"), out.stdout);
  } finally {
    const all = await redis.keys(`${prefix}*`);
    if (all.length > 0) await redis.del(...all);
    redis.disconnect();
  }
});
