// Writers outside any attempt claim what they last wrote: a producer whose session log lost its
// turn.queued (a failover) refuses to queue the next turn after the hole, saying what happened, once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { LogRolledBackError } from "../../src/log/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { cleanupKeys, readAll, redisFor, testSpace } from "../worker/_support.ts";

test("enqueue on a log that lost this producer's turn.queued: LogRolledBackError, nothing appended; then it goes on", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  try {
    const cwd = space.workspace();
    const first = await producer.enqueueTurn({ prompt: "one", cwd });
    const keys = producer.log.keys(first.session);
    const saved = await Promise.all(
      [keys.events, keys.meta].map(async (key) => [key, await redis.dumpBuffer(key)] as const),
    );
    const second = await producer.enqueueTurn({ session: first.session, prompt: "two", cwd });
    assert.equal(second.queuedSeq, 2);
    // The failover: the replica had the first turn.queued, not the second.
    for (const [key, dump] of saved) await redis.restore(key, 0, dump!, "REPLACE");
    const refused = await producer.enqueueTurn({ session: first.session, prompt: "three", cwd }).then(
      () => assert.fail("queued after a hole"),
      (err: unknown) => err,
    );
    assert.ok(refused instanceof LogRolledBackError, String(refused));
    assert.deepEqual([refused.ackedSeq, refused.lastSeq], [2, 1]);
    assert.match(refused.message, new RegExp(`session ${first.session}: the event log lost acknowledged writes`));
    assert.deepEqual(
      (await readAll(producer.log, first.session)).map((e) => e.seq),
      [1],
      "nothing appended after the hole",
    );
    assert.deepEqual(
      await producer.order.pending(first.session),
      [first.turn, second.turn],
      "the refused turn is not left in the session's order",
    );
    // Said once: the producer forgets its claim, so the caller can queue again on the log as it is.
    const again = await producer.enqueueTurn({ session: first.session, prompt: "three", cwd });
    assert.equal(again.queuedSeq, 2);
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});
