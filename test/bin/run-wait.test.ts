// `turnstream run --wait` in a pipeline: durations, the wait's and the turn's timeouts, a warning and
// exit 3 when no worker takes the turn, and exactly one JSON object under --json whatever happens.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createEventLog } from "../../src/log/index.ts";
import { closeTurnQueue, createTurnQueue } from "../../src/queue/index.ts";
import { parseDuration } from "../../src/bin/commands/_duration.ts";
import { cleanupKeys, readAll, redisFor, testSpace } from "../worker/_support.ts";
import { onlyJson, turnstream } from "./_cli.ts";

test("durations: 30s, 10m, 1h, 500ms and plain milliseconds; anything else is refused", () => {
  assert.equal(parseDuration("30s"), 30_000);
  assert.equal(parseDuration("10m"), 600_000);
  assert.equal(parseDuration("1h"), 3_600_000);
  assert.equal(parseDuration("500ms"), 500);
  assert.equal(parseDuration("1500"), 1500);
  assert.equal(parseDuration("1.5s"), 1500);
  for (const bad of ["", "0", "-1s", "5x", "s", "10 m", "1e3"]) assert.equal(parseDuration(bad), undefined, bad);
});

test("a malformed duration is a usage error naming the flag, before anything is queued", async () => {
  const badTimeout = await turnstream(["run", "--wait", "--timeout", "5x", "--", "hi"]);
  assert.equal(badTimeout.code, 2);
  assert.match(badTimeout.stderr, /--timeout takes a duration such as 30s/);
  const json = await turnstream(["run", "--wait", "--json", "--turn-timeout", "soon", "--", "hi"]);
  assert.equal(json.code, 2);
  const said = onlyJson(json.stdout);
  assert.equal(said["outcome"], "usage");
  assert.equal(said["exitCode"], 2);
  assert.match(String(said["error"]), /--turn-timeout/);
  const unknownFlag = await turnstream(["run", "--wait", "--json", "--no-such-flag", "--", "hi"]);
  assert.equal(unknownFlag.code, 2);
  assert.equal(onlyJson(unknownFlag.stdout)["outcome"], "usage");
  assert.match(unknownFlag.stderr, /--no-such-flag/);
});

test("Redis unreachable: exit 3 and one JSON object naming the URL without its password", async () => {
  const noRedis = await turnstream(["run", "--wait", "--json", "--", "hi"], {
    REDIS_URL: "redis://user:hunter2-secret@127.0.0.1:1",
  });
  assert.equal(noRedis.code, 3);
  const said = onlyJson(noRedis.stdout);
  assert.equal(said["outcome"], "infrastructure");
  assert.match(String(said["error"]), /cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
  assert.ok(!(noRedis.stdout + noRedis.stderr).includes("hunter2"));
});

test("no worker: a warning at once; --start-timeout exits 3 and cancels the turn; --timeout exits 4", async () => {
  const space = testSpace();
  const redis = redisFor();
  const flags = ["--prefix", space.logPrefix, "--queue-prefix", space.queuePrefix, "--cwd", space.workspace()];
  try {
    // A cold start of the command, which a loaded machine can stretch many times over, bounds the wait below.
    const calibrating = Date.now();
    assert.equal((await turnstream(["run", "--wait", "--timeout", "5x", "--", "hi"])).code, 2);
    const coldStartMs = Date.now() - calibrating;
    const started = Date.now();
    const noStart = await turnstream([
      "run",
      "--wait",
      "--json",
      "--start-timeout",
      "1s",
      ...flags,
      "--",
      "never runs",
    ]);
    assert.equal(noStart.code, 3, noStart.stderr);
    assert.match(noStart.stderr, /warning: no live worker on queue/);
    const tookMs = Date.now() - started;
    assert.ok(
      tookMs < 1000 + 3 * coldStartMs + 5000,
      `gave up ${tookMs} ms after the start (cold start ${coldStartMs} ms)`,
    );
    const said = onlyJson(noStart.stdout);
    assert.equal(said["outcome"], "infrastructure");
    assert.match(String(said["error"]), /no worker took the turn within 1000 ms/);
    const log = createEventLog({ redis, prefix: space.logPrefix });
    const kinds = (await readAll(log, String(said["session"]))).map((e) => e.kind);
    assert.deepEqual(kinds, ["turn.queued", "turn.cancelled"], "a turn no worker took does not run later as a stray");

    const waited = await turnstream([
      "run",
      "--wait",
      "--json",
      "--timeout",
      "1s",
      ...flags,
      "--",
      "never runs either",
    ]);
    assert.equal(waited.code, 4, waited.stderr);
    const timedOut = onlyJson(waited.stdout);
    assert.equal(timedOut["outcome"], "timed_out");
    assert.equal(timedOut["exitCode"], 4);
    assert.match(String(timedOut["error"]), /did not end within --timeout \(1s\); it goes on running/);

    const legacy = await turnstream(["run", "--wait", "--timeout-ms", "500", ...flags, "--", "the old flag"]);
    assert.equal(legacy.code, 4, legacy.stderr);
    assert.match(legacy.stderr, /did not end within --timeout \(500 ms\)/);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("--turn-timeout becomes the job's timeoutMs; --label pairs are the turn's labels, a bad one exits 2", async () => {
  const space = testSpace();
  const redis = redisFor();
  const queue = createTurnQueue({ redis, queuePrefix: space.queuePrefix });
  try {
    const enqueued = await turnstream([
      "run",
      "--json",
      "--turn-timeout",
      "10m",
      "--label",
      "repo=acme/api",
      "--label",
      "pr=12",
      "--prefix",
      space.logPrefix,
      "--queue-prefix",
      space.queuePrefix,
      "--cwd",
      space.workspace(),
      "--",
      "bounded",
    ]);
    assert.equal(enqueued.code, 0, enqueued.stderr);
    const { turn } = onlyJson(enqueued.stdout) as { turn: string };
    const job = await queue.getJob(turn);
    assert.equal((job?.data as { options: { timeoutMs?: number } }).options.timeoutMs, 600_000);
    const { session } = onlyJson(enqueued.stdout) as { session: string };
    const log = createEventLog({ redis, prefix: space.logPrefix });
    const queued = (await readAll(log, session)).find((event) => event.kind === "turn.queued")!;
    assert.deepEqual((queued.data as { labels?: unknown }).labels, { repo: "acme/api", pr: "12" });
    const bad = await turnstream(["run", "--label", "Repo=x", "--prefix", space.logPrefix, "--", "hi"]);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /labels\.Repo/);
  } finally {
    await closeTurnQueue(queue);
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
