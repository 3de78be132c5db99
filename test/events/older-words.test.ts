// Names changed so each word has one meaning (docs/ARCHITECTURE.md, "Words") still read as before:
// test/fixtures/logs/older-words.jsonl is a log written under the older names (a turn.queued with
// `onLostSession: "replay"`, a lost session recorded as `session.replayed`), imported through the
// log's own import and replayed into read models; and the older policy name is still accepted.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { currentKind, dataOf, isEventKind, RENAMED_KINDS } from "../../src/events/index.ts";
import { connectRedis, createEventLog, importFile, type Envelope } from "../../src/log/index.ts";
import { replaySession } from "../../src/projector/index.ts";
import { enqueueInputSchema, lostSessionPolicyOf } from "../../src/queue/index.ts";

const file = join(import.meta.dirname, "..", "fixtures", "logs", "older-words.jsonl");
const recorded = readFileSync(file, "utf8")
  .split("\n")
  .filter((l) => l !== "")
  .map((l) => JSON.parse(l) as Envelope);

test("a log with session.replayed reads it as session.replaced: counted, its data fits, nothing carried unknown", async () => {
  const old = recorded.find((e) => e.kind === "session.replayed");
  assert.ok(old, "the fixture holds the older kind");
  assert.deepEqual(RENAMED_KINDS, { "session.replayed": "session.replaced" });
  assert.equal(currentKind(old.kind), "session.replaced");
  assert.equal(currentKind("session.snapshot"), "session.snapshot");
  assert.ok(isEventKind("session.replayed") && isEventKind("session.replaced"));
  assert.deepEqual(dataOf("session.replaced", old.data), {
    by: "worker",
    reason: "lost_session",
    previousCliSessionId: "0b9a7c52-4d1e-4f7a-9e0c-5a3b2d1c0e9f",
    cliSessionId: "94bb3072-118c-47ce-bddf-2de90d813696",
    turns: 1,
  });

  const redis = connectRedis({ url: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379", env: {} });
  const log = createEventLog({ redis, prefix: `tw${randomBytes(4).toString("hex")}:` });
  const session = recorded[0]!.session;
  try {
    const imported = await importFile(log, session, file);
    assert.deepEqual([imported.mode, imported.count], ["envelopes", recorded.length]);
    const state = await replaySession(log, session);
    assert.deepEqual(state.carried.malformed, {}, "every event fits its kind's schema");
    assert.equal(state.carried.total, 0, "no kind carried as unknown");
    assert.equal(state.view.replays, 1, "the replaced CLI session is counted");
    assert.deepEqual(
      state.view.turns.map((t) => [t.status, t.acceptedAttempt]),
      [
        ["finished", 1],
        ["finished", 1],
      ],
    );
  } finally {
    await log.destroy(session);
    redis.disconnect();
  }
});

test('onLostSession "replay", the older name of "restore", is accepted and read as "restore"', () => {
  const request = { prompt: "go on", cwd: "/tmp/ws" };
  for (const policy of ["replay", "restore"] as const)
    assert.equal(enqueueInputSchema.parse({ ...request, onLostSession: policy }).onLostSession, "restore", policy);
  assert.equal(enqueueInputSchema.parse({ ...request, onLostSession: "fail" }).onLostSession, "fail");
  assert.equal(enqueueInputSchema.safeParse({ ...request, onLostSession: "retry" }).success, false);

  // A session's settings keep what its first turn said, so a session begun before still says "replay".
  const queued = recorded.find((e) => e.kind === "turn.queued")!;
  assert.equal(lostSessionPolicyOf(dataOf("turn.queued", queued.data)?.onLostSession), "restore");
  assert.equal(lostSessionPolicyOf("restore"), "restore");
  assert.equal(lostSessionPolicyOf("fail"), "fail");
  assert.equal(lostSessionPolicyOf("retry"), undefined);
  assert.equal(lostSessionPolicyOf(undefined), undefined);
});
