// The library reads the variables the commands and worker processes read: a producer and a worker
// given no prefix or queue name find each other where TURNSTREAM_PREFIX, TURNSTREAM_QUEUE_PREFIX and
// TURNSTREAM_QUEUE_NAME say (an option given wins), and a producer that waits for a turn nobody serves
// says so once through its logger. The turn runs the real CLI against the scripted model server.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  createProducer,
  noWorkerWarning,
  queueConfigFromEnv,
  WaitTimeoutError,
  WORKER_CHECK_MS,
} from "../../src/queue/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startTurnWorker } from "../../src/worker/index.ts";
import type { Logger } from "../../src/kernel/index.ts";
import { cleanupKeys, cliEnv, redisFor, testSpace } from "../worker/_support.ts";

const VARIABLES = ["TURNSTREAM_PREFIX", "TURNSTREAM_QUEUE_PREFIX", "TURNSTREAM_QUEUE_NAME", "TURNSTREAM_DURABILITY"];

/** A logger that keeps what is warned. */
function warningsLogger(): { logger: Logger; warnings: unknown[][] } {
  const warnings: unknown[][] = [];
  const noop = (): void => {};
  return {
    warnings,
    logger: { debug: noop, info: noop, error: noop, warn: (...args: unknown[]) => warnings.push(args) },
  };
}

/** Runs `use` with these variables set in this process's environment, then puts it back as it was. */
async function withEnv(values: Record<string, string>, use: () => Promise<void>): Promise<void> {
  const before = Object.fromEntries(VARIABLES.map((name) => [name, process.env[name]]));
  Object.assign(process.env, values);
  try {
    await use();
  } finally {
    for (const [name, value] of Object.entries(before))
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
  }
}

test("one reading of the variables: an empty one is unset, and only these four are read", () => {
  assert.deepEqual(
    queueConfigFromEnv({
      TURNSTREAM_PREFIX: "p:",
      TURNSTREAM_QUEUE_PREFIX: "",
      TURNSTREAM_QUEUE_NAME: "q",
      TURNSTREAM_DURABILITY: "replicas:1",
      TURNSTREAM_OTHER: "x",
    }),
    { logPrefix: "p:", queueName: "q", durability: "replicas:1" },
  );
});

test("a producer and a worker given no prefixes or queue name meet where the variables say; a given option wins", async () => {
  const space = testSpace();
  const redis = redisFor();
  const server = await startModelServer({
    script: { responses: [{ content: [{ type: "text", text: "found you" }] }] },
  });
  const queueName = `env-${space.id}`;
  await withEnv(
    {
      TURNSTREAM_PREFIX: space.logPrefix,
      TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
      TURNSTREAM_QUEUE_NAME: queueName,
    },
    async () => {
      const { logger, warnings } = warningsLogger();
      const producer = createProducer({ redis, logger });
      const worker = startTurnWorker({
        redis,
        workspaceRoots: [space.workspace()],
        instanceRoot: space.dir("instances"),
        runEnv: cliEnv(server.url),
      });
      const elsewhere = createProducer({ redis, queueName: "turns-given" });
      try {
        assert.equal(producer.queue.name, queueName);
        assert.equal(producer.queue.opts.prefix, space.queuePrefix);
        assert.equal(producer.log.prefix, space.logPrefix);
        assert.equal(worker.worker.name, queueName);
        assert.equal(elsewhere.queue.name, "turns-given", "an option given wins over the variable");
        assert.equal(elsewhere.queue.opts.prefix, space.queuePrefix);
        await worker.ready();
        const { session, turn } = await producer.enqueueTurn({ prompt: "where are you?", cwd: space.workspace() });
        const result = await producer.waitForTurn(turn, { timeoutMs: 120_000 });
        assert.equal(result.status, "finished", `${result.errorKind}: ${result.error}`);
        assert.equal(result.resultText, "found you");
        assert.equal(
          await redis.exists(`${space.logPrefix}{s:${session}}:events`),
          1,
          "the log is under TURNSTREAM_PREFIX",
        );
        // The check runs beside the wait and gives up after WORKER_CHECK_MS: by then it has said what it found.
        await new Promise((resolve) => setTimeout(resolve, WORKER_CHECK_MS + 100));
        assert.deepEqual(warnings, [], "a worker served the queue: nothing to warn about");
      } finally {
        await worker.close({ graceMs: 1000 });
        await elsewhere.close();
        await producer.close();
      }
    },
  );
  await server.close();
  await cleanupKeys(redis, space);
  redis.disconnect();
  space.cleanup();
});

test("waitForTurn with no worker on the queue warns through the producer's logger, once", async () => {
  const space = testSpace();
  const redis = redisFor();
  const { logger, warnings } = warningsLogger();
  const queueName = `nobody-${space.id}`;
  const producer = createProducer({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    queueName,
    logger,
  });
  try {
    for (const prompt of ["first", "second"]) {
      const { turn } = await producer.enqueueTurn({ prompt, cwd: space.workspace() });
      // Longer than the check's bound, so the check has said what it found.
      await assert.rejects(producer.waitForTurn(turn, { timeoutMs: WORKER_CHECK_MS + 1000 }), WaitTimeoutError);
    }
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.deepEqual(warnings[0], [{ queue: queueName }, noWorkerWarning(queueName)]);
    assert.match(noWorkerWarning(queueName), new RegExp(`no live worker on queue '${queueName}'`));
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
