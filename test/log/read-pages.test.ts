// Paged reads: page boundaries, fromSeq/toSeq bounds with the next page requested ahead, blob
// entries in the middle of a page, and an invalid entry in the middle of a page.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  connectRedis,
  createEventLog,
  InvalidEventError,
  type Envelope,
  type EventLog,
  type RedisClient,
} from "../../src/log/index.ts";

let redis: RedisClient;
let log: EventLog;
const prefix = `test:${randomBytes(6).toString("hex")}:`;
const sessions: string[] = [];
const session = (): string => {
  const sessionId = `s-${randomBytes(6).toString("hex")}`;
  sessions.push(sessionId);
  return sessionId;
};

describe("paged reads", () => {
  before(() => {
    redis = connectRedis({ env: { REDIS_URL: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379" } });
    log = createEventLog({ redis, prefix, blobCapBytes: 1024 });
  });
  after(async () => {
    for (const sessionId of sessions) await log.destroy(sessionId);
    await redis.del(`${prefix}sessions`);
    redis.disconnect();
  });

  async function pages(sessionId: string, opts: Parameters<EventLog["readPages"]>[1]): Promise<Envelope[][]> {
    const out: Envelope[][] = [];
    for await (const page of log.readPages(sessionId, opts)) out.push(page);
    return out;
  }

  async function filled(count: number): Promise<{ s: string; raws: string[] }> {
    const sessionId = session();
    const { epoch } = await log.beginAttempt(sessionId, "t1");
    // Every 7th line is above the blob cap, so blob entries fall inside pages.
    const raws = Array.from({ length: count }, (_, i) =>
      i % 7 === 3 ? `{"big":${i},"pad":"${"x".repeat(1100)}"}` : `{"n":${i}}`,
    );
    await log.append(
      sessionId,
      epoch,
      raws.map((raw) => ({ turn: "t1", attempt: 1, kind: "cli.line", data: { raw } })),
    );
    assert.equal((await redis.smembers(log.keys(sessionId).blobs)).length, Math.floor((count + 3) / 7));
    return { s: sessionId, raws };
  }

  test("pages cover exactly the requested range, in order, blobs resolved in place", async () => {
    const { s: sessionId, raws } = await filled(23);
    const all = await pages(sessionId, { pageSize: 5 });
    assert.deepEqual(
      all.map((p) => p.length),
      [5, 5, 5, 5, 3],
    );
    const flat = all.flat();
    assert.deepEqual(
      flat.map((e) => e.seq),
      raws.map((_, i) => i + 1),
    );
    assert.deepEqual(
      flat.map((e) => (e.data as { raw: string }).raw),
      raws,
    );
    assert.ok(flat.every((e) => e.session === sessionId && e.v === 1 && e.kind === "cli.line"));

    const bounded = (await pages(sessionId, { fromSeq: 4, toSeq: 15, pageSize: 4 })).flat().map((e) => e.seq);
    assert.deepEqual(bounded, [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    assert.deepEqual((await pages(sessionId, { fromSeq: 20, toSeq: 19, pageSize: 4 })).flat(), []);
    assert.deepEqual((await pages(sessionId, { fromSeq: 24, pageSize: 4 })).flat(), []);
    // An exact multiple of the page size ends without an extra empty page.
    assert.deepEqual(
      (await pages(sessionId, { toSeq: 20, pageSize: 5 })).map((p) => p.length),
      [5, 5, 5, 5],
    );

    const perEvent: number[] = [];
    for await (const event of log.read(sessionId, { fromSeq: 2, pageSize: 3 })) perEvent.push(event.seq);
    assert.deepEqual(perEvent, raws.map((_, i) => i + 1).slice(1));
  });

  test("a consumer that stops early leaves nothing behind to fail", async () => {
    const { s: sessionId } = await filled(12);
    const seen: number[] = [];
    for await (const page of log.readPages(sessionId, { pageSize: 4 })) {
      seen.push(...page.map((e) => e.seq));
      break;
    }
    assert.deepEqual(seen, [1, 2, 3, 4]);
    // The connection is still usable and in order after the abandoned look-ahead request.
    assert.equal((await log.stat(sessionId)).lastSeq, 12);
  });

  test("an invalid entry in the middle of a page: the events before it arrive, then InvalidEventError", async () => {
    const sessionId = session();
    const keys = log.keys(sessionId);
    const good = (seq: number) =>
      redis.xadd(
        keys.events,
        `0-${seq}`,
        "e",
        JSON.stringify({ v: 1, turn: "t", attempt: 0, epoch: 0, at: "x", kind: "turn.queued", data: {} }),
      );
    await good(1);
    await good(2);
    // cli.line without its raw text: zod (not the fast check) has to say no.
    await redis.xadd(
      keys.events,
      "0-3",
      "e",
      JSON.stringify({ v: 1, turn: "t", attempt: 0, epoch: 0, at: "x", kind: "cli.line", data: {} }),
    );
    await good(4);
    await redis.hset(keys.meta, "seq", 4);
    const got: number[] = [];
    await assert.rejects(
      async () => {
        for await (const page of log.readPages(sessionId, { pageSize: 10 })) got.push(...page.map((e) => e.seq));
      },
      (err: unknown) => err instanceof InvalidEventError && err.seq === 3 && /raw/.test(err.message),
    );
    assert.deepEqual(got, [1, 2]);
    await assert.rejects(async () => {
      for await (const _ of log.read(sessionId, { fromSeq: 3 })) assert.fail("no event before the invalid one");
    }, InvalidEventError);
    // Wrong field types are refused too (the fast check defers to zod, which rejects).
    await redis.xadd(
      keys.events,
      "0-5",
      "e",
      JSON.stringify({ v: 1, turn: "t", attempt: -1, epoch: 0, at: "x", kind: "turn.queued", data: {} }),
    );
    await assert.rejects(async () => {
      for await (const _ of log.read(sessionId, { fromSeq: 5 })) assert.fail("invalid attempt accepted");
    }, InvalidEventError);
  });
});
