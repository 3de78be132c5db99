// SIGTERM to a worker process with a turn running: the shutdown is bounded by the grace period plus
// the kill grace, the CLI's tree is ended, the attempt is recorded abandoned and the job handed back,
// so a worker started afterwards completes the turn. With Redis gone the shutdown stays bounded.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connectRedis } from "../../src/log/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { startModelServer } from "../../src/testing/index.ts";
import { startRedisServer } from "../support/redis-server.ts";
import {
  cliEnv,
  processFleet,
  readAll,
  startWorkerProcess,
  testSpace,
  treeMembers,
  type WorkerProcess,
  waitUntil,
} from "../worker/_support.ts";
import { dataOf, findTreeProcess, kindsOf, startWorkerCommand } from "../worker/_more.ts";

const GRACE_MS = 500;
const KILL_GRACE_MS = 2000; // the worker's default
const CLOSE_TIMEOUT_MS = 5000; // the worker's default, for connections that do not answer

test("SIGTERM with a running turn: bounded exit, tree gone, attempt abandoned, the next worker completes the turn", async () => {
  const fleet = await processFleet({
    responses: [
      {
        content: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "echo begin; sleep 30; echo slept", description: "wait" },
          },
        ],
      },
      { content: [{ type: "text", text: "completed after the restart" }] },
    ],
  });
  const { space, producer, ws } = fleet;
  const start = (name: string): Promise<WorkerProcess> =>
    fleet.start(name, {
      TURNSTREAM_INSTANCE_ID: `inst-${name}`,
      TURNSTREAM_SANDBOXED: "1",
      TURNSTREAM_SHUTDOWN_GRACE_MS: String(GRACE_MS),
    });
  try {
    const workerA = await start("a");
    const queued = await producer.enqueueTurn({
      prompt: "run the slow command",
      cwd: ws,
      options: { skipPermissions: true },
    });
    let sleep: ReturnType<typeof findTreeProcess>;
    await waitUntil(
      () => (sleep = findTreeProcess("sleep 30", `${space.root}/root-a/`)) !== undefined,
      30000,
      "the Bash tool's sleep to start",
    );
    assert.ok(treeMembers(sleep!.marker).length >= 2, "the CLI and its Bash command carry the marker");

    const t0 = Date.now();
    workerA.kill("SIGTERM");
    const exit = await workerA.exited;
    const took = Date.now() - t0;
    assert.equal(exit.code, 0);
    assert.ok(took <= GRACE_MS + KILL_GRACE_MS + 2500, `worker exited after ${took} ms`);
    assert.ok(took >= GRACE_MS, `the running turn had its grace period (${took} ms)`);
    assert.deepEqual(treeMembers(sleep!.marker), [], "the CLI's tree is gone when the worker has exited");

    const before = (await readAll(producer.log, queued.session)).filter((e) => e.turn === queued.turn);
    assert.deepEqual(kindsOf(before), ["turn.queued", "attempt.started", "cli.exit", "attempt.abandoned"]);
    assert.deepEqual(dataOf(before.at(-1)!), { reason: "shutdown", attempt: 1, retry: true });
    assert.ok(
      before.some((e) => e.kind === "cli.line" && String(dataOf(e)["raw"]).includes('"name":"Bash"')),
      "attempt 1 had reached the tool call",
    );

    const workerB = await start("b");
    const result = await producer.waitForTurn(queued.turn, { timeoutMs: 30000 });
    assert.equal(result.status, "finished", JSON.stringify(result.event.data));
    assert.equal(result.attempt, 2);
    assert.equal(result.resultText, "completed after the restart");
    const events = (await readAll(producer.log, queued.session)).filter((e) => e.turn === queued.turn);
    const started = events.filter((e) => e.kind === "attempt.started");
    assert.equal(started.length, 2);
    assert.match(
      String(dataOf(started[1]!)["worker"]),
      new RegExp(`-${workerB.pid}-`),
      "attempt 2 ran on the second worker",
    );
    assert.ok(started[1]!.epoch > started[0]!.epoch);
    assert.equal(
      events.filter((e) => e.kind === "attempt.abandoned").length,
      1,
      "the shutdown's own record; nobody re-records it as crashed",
    );
    assert.equal(events.at(-1)!.kind, "turn.finished");
  } finally {
    await fleet.dispose();
  }
});

/** Resolves with the exit, or "still running" once `ms` have passed (the caller then kills it). */
function exitWithin(
  worker: WorkerProcess,
  ms: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null } | "still running"> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    worker.exited.finally(() => clearTimeout(timer)),
    new Promise<"still running">((resolve) => (timer = setTimeout(() => resolve("still running"), ms))),
  ]);
}

// Both ways of running a worker process: the entry point (grace from the environment) and the
// command (grace from --grace-ms). With a turn running, the CLI's tree must be ended too.
for (const variant of [
  { name: "workers/turn-worker.ts, TURNSTREAM_SHUTDOWN_GRACE_MS, a turn running", command: false, turn: true },
  { name: "turnstream worker --grace-ms, idle", command: true, turn: false },
]) {
  test(`SIGTERM while Redis is unreachable (${variant.name}): the worker exits within a bound`, async () => {
    const space = testSpace();
    const redisServer = await startRedisServer();
    const server = await startModelServer({
      script: {
        responses: [
          {
            content: [
              {
                type: "tool_use",
                name: "Bash",
                input: { command: "echo begin; sleep 31; echo slept", description: "wait" },
              },
            ],
          },
        ],
      },
    });
    const redis = connectRedis({ url: redisServer.url });
    redis.on("error", () => undefined);
    const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
    const ws = space.workspace();
    const env: Record<string, string> = {
      REDIS_URL: redisServer.url,
      ...cliEnv(server.url),
      TURNSTREAM_WORKSPACE_ROOTS: ws,
      TURNSTREAM_PREFIX: space.logPrefix,
      TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
      TURNSTREAM_INSTANCE_ROOT: space.dir("root-w"),
      TURNSTREAM_SANDBOXED: "1",
    };
    const worker = variant.command
      ? await startWorkerCommand(env, ["--grace-ms", String(GRACE_MS)])
      : await startWorkerProcess({ ...env, TURNSTREAM_SHUTDOWN_GRACE_MS: String(GRACE_MS) });
    try {
      let sleep: ReturnType<typeof findTreeProcess>;
      if (variant.turn) {
        await producer.enqueueTurn({ prompt: "run the slow command", cwd: ws, options: { skipPermissions: true } });
        await waitUntil(
          () => (sleep = findTreeProcess("sleep 31", `${space.root}/root-w/`)) !== undefined,
          30000,
          "the Bash tool's sleep to start",
        );
      }
      await producer.close();
      await redisServer.stop("SIGKILL");

      // Documented: about grace + kill grace + close timeout; the forced close and the connection quits
      // that follow have 1 s bounds of their own (measured: ~9.5 s for the values here).
      const bound = GRACE_MS + KILL_GRACE_MS + CLOSE_TIMEOUT_MS + 3000;
      const t0 = Date.now();
      worker.kill("SIGTERM");
      const exit = await exitWithin(worker, bound + 4000);
      const took = Date.now() - t0;
      const stopped = worker.lines.some((l) => l["msg"] === "worker stopped");
      assert.notEqual(
        exit,
        "still running",
        `no exit ${took} ms after SIGTERM (${stopped ? "it had logged 'worker stopped'" : "shutdown not finished"})`,
      );
      assert.deepEqual(
        exit,
        { code: 0, signal: null },
        `a clean exit although Redis is gone; last log: ${JSON.stringify(worker.lines.slice(-3))}`,
      );
      assert.ok(took <= bound, `worker exited after ${took} ms`);
      if (sleep !== undefined)
        assert.deepEqual(treeMembers(sleep.marker), [], "the CLI's tree is gone when the worker has exited");
    } finally {
      worker.kill("SIGKILL");
      await worker.exited;
      redis.disconnect();
      await server.close();
      await redisServer.dispose();
      space.cleanup();
    }
  });
}
