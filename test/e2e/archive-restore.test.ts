// A session retention archived and removed from Redis comes back when a new turn is enqueued to it:
// the producer restores it from the archive, and a worker that never saw the session resumes the
// CLI session from the log's latest snapshot; the log goes on at the archived last seq + 1.
import { test } from "node:test";
import assert from "node:assert/strict";
import { archiveRestorer, FileArchive, runRetention } from "../../src/archive/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { processFleet, readAll, waitUntil } from "../worker/_support.ts";
import { keysUnder } from "../archive/_support.ts";

test("a turn for an archived session restores it and resumes its CLI session; an old turn id stays a no-op", async () => {
  const fleet = await processFleet({
    responses: [
      { content: [{ type: "text", text: "noted" }] },
      { content: [{ type: "text", text: "the word was kumquat" }] },
    ],
  });
  const { server, producer, ws, redis, space } = fleet;
  const archive = new FileArchive(space.dir("archive"));
  await archive.migrate();
  const restoring = createProducer({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    restore: archiveRestorer(producer.log, redis, archive),
  });
  try {
    const workerA = await fleet.start("a", { TURNSTREAM_INSTANCE_ID: "inst-a" });
    const first = { prompt: "remember the word kumquat-marker", cwd: ws, idempotencyKey: "first" };
    const t1 = await producer.enqueueTurn(first);
    const r1 = await producer.waitForTurn(t1.turn, { timeoutMs: 60000 });
    assert.equal(r1.status, "finished", JSON.stringify(r1.event.data));
    workerA.kill("SIGTERM");
    assert.equal((await workerA.exited).code, 0);
    const before = await readAll(producer.log, t1.session);

    const retain = () =>
      runRetention({
        log: producer.log,
        redis,
        queue: producer.queue,
        archive,
        olderThanMs: 0,
        now: Date.now() + 1000,
      });
    await waitUntil(
      async () => (await retain()).sessions.some((entry) => entry.action === "archived"),
      20000,
      "retention",
    );
    assert.deepEqual(await keysUnder(redis, `${space.logPrefix}*`), []);

    await fleet.start("b", { TURNSTREAM_INSTANCE_ID: "inst-b" });
    const t2 = await restoring.enqueueTurn({ session: t1.session, prompt: "which word?", cwd: ws });
    assert.equal(t2.queuedSeq, before.at(-1)!.seq + 1, "the log goes on after the archived last seq");
    const r2 = await restoring.waitForTurn(t2.turn, { timeoutMs: 60000 });
    assert.equal(r2.status, "finished", JSON.stringify(r2.event.data));
    assert.equal(r2.resultText, "the word was kumquat");
    assert.equal(r2.cliSessionId, r1.cliSessionId, "the CLI session was resumed, not replaced");
    const msgs = server.requests().filter((request) => request.kind === "messages");
    assert.ok(JSON.stringify(msgs.at(-1)!.messages).includes("kumquat-marker"));
    const events = await readAll(producer.log, t1.session);
    assert.deepEqual(events.slice(0, before.length), before, "the restored history is the archived one");

    const again = await restoring.enqueueTurn(first);
    assert.equal(again.created, false);
    assert.equal(again.queuedSeq, t1.queuedSeq);
    assert.equal((await producer.log.stat(t1.session)).lastSeq, events.at(-1)!.seq, "nothing was appended");
  } finally {
    await restoring.close();
    await fleet.dispose();
  }
});
