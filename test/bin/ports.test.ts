// A port already taken stops `turnstream dashboard` and `turnstream worker` (its ops endpoint) at once,
// with a message naming the port and the flag or variable that moves it, instead of a process that
// runs on serving nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";
import { turnstream } from "./_cli.ts";

/** A port some other process holds, for the length of `use`. */
async function withTakenPort(use: (port: number) => Promise<void>): Promise<void> {
  const holder: Server = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  try {
    await use((holder.address() as { port: number }).port);
  } finally {
    await new Promise((resolve) => holder.close(resolve));
  }
}

/** Well under what a command left running would take: the helper gives up after 60 s (code -1). */
const PROMPT_EXIT_MS = 30_000;

test("dashboard on a taken port: exit 2 at once, naming the port and --port", async () => {
  await withTakenPort(async (port) => {
    const started = Date.now();
    const run = await turnstream(["dashboard", "--port", String(port)]);
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.ok(Date.now() - started < PROMPT_EXIT_MS, `took ${Date.now() - started} ms`);
    assert.match(
      run.stderr,
      new RegExp(
        `^turnstream dashboard: cannot serve the console: port ${port} on 127\\.0\\.0\\.1 is already in use; pick another with --port N`,
        "m",
      ),
    );
    assert.doesNotMatch(run.stdout, /dashboard at/);
  });
});

test("worker whose ops port is taken: exit 2 at once, naming the port and the flag or variable that set it", async () => {
  const space = testSpace();
  const redis = redisFor();
  const env = {
    TURNSTREAM_WORKSPACE_ROOTS: space.workspace(),
    TURNSTREAM_INSTANCE_ROOT: space.dir("instances"),
    TURNSTREAM_PREFIX: space.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
  };
  try {
    await withTakenPort(async (port) => {
      const started = Date.now();
      const byFlag = await turnstream(["worker", "--ops-port", String(port)], env);
      assert.equal(byFlag.code, 2, byFlag.stdout + byFlag.stderr);
      assert.ok(Date.now() - started < PROMPT_EXIT_MS, `took ${Date.now() - started} ms`);
      assert.match(
        byFlag.stderr,
        new RegExp(
          `^turnstream worker: the ops endpoint cannot listen: port ${port} on 127\\.0\\.0\\.1 is already in use \\(--ops-port\\); pick a free port with --ops-port N`,
          "m",
        ),
      );
      assert.doesNotMatch(byFlag.stdout, /worker ready/);
      const byVariable = await turnstream(["worker"], { ...env, TURNSTREAM_OPS_PORT: String(port) });
      assert.equal(byVariable.code, 2, byVariable.stdout + byVariable.stderr);
      assert.match(
        byVariable.stderr,
        new RegExp(`port ${port} .*\\(TURNSTREAM_OPS_PORT\\); pick a free port with TURNSTREAM_OPS_PORT N`),
      );
    });
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
