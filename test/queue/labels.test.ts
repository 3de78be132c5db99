// A turn's labels: recorded in turn.queued and folded onto the turn; names and values a listing or a
// SQL group-by can show as written, so a label holding control characters, too many labels or a
// secret-shaped value is refused by name before anything is written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createProducer, InvalidTurnError } from "../../src/queue/index.ts";
import { fold } from "../../src/projector/index.ts";
import { cleanupKeys, readAll, redisFor, testSpace } from "../worker/_support.ts";

test("labels are recorded in turn.queued and folded onto each turn; bad ones are refused by name", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  try {
    const cwd = space.workspace();
    const first = await producer.enqueueTurn({ prompt: "one", cwd, labels: { repo: "acme/api", pr: "12" } });
    const second = await producer.enqueueTurn({ prompt: "two", cwd, session: first.session, labels: { pr: "13" } });
    const events = await readAll(producer.log, first.session);
    const queued = events.filter((event) => event.kind === "turn.queued").map((event) => event.data);
    assert.deepEqual(
      queued.map((data) => (data as { labels?: unknown }).labels),
      [{ repo: "acme/api", pr: "12" }, { pr: "13" }],
    );
    const turns = fold(events).view.turns;
    assert.deepEqual(
      turns.map((turn) => [turn.id, turn.labels]),
      [
        [first.turn, { repo: "acme/api", pr: "12" }],
        [second.turn, { pr: "13" }],
      ],
    );

    const refused = async (labels: Record<string, string>, field: RegExp, why: RegExp): Promise<void> => {
      const err = await producer.enqueueTurn({ prompt: "x", cwd, labels }).then(
        () => assert.fail(`accepted ${JSON.stringify(labels)}`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof InvalidTurnError, String(err));
      assert.match(err.field, field);
      assert.match(err.message, why);
    };
    await refused({ Repo: "x" }, /^labels\.Repo$/, /lowercase letter/);
    await refused({ repo: "a\u202eb" }, /^labels\.repo$/, /control or format/);
    await refused({ repo: "line\nbreak" }, /^labels\.repo$/, /control or format/);
    await refused({ repo: "x".repeat(201) }, /^labels\.repo$/, /200/);
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`l${index}`, "v"]));
    await refused(many, /^labels$/, /at most 16/);
    const token = `ghp_${"A1b2C3d4E5".repeat(3)}abcdef`;
    await refused({ owner: token }, /^labels\.owner$/, /github_token/);
    assert.equal((await readAll(producer.log, first.session)).length, events.length, "nothing more was written");
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
