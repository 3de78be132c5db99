// Two worker processes started with the same instance id (different instance roots, as on two
// hosts): the second logs the clash once as an error and its /readyz fails on `instance_taken` until the
// first has stopped, then it holds the id and is ready.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readWorkers } from "../../src/worker/registry.ts";
import { cleanupKeys, redisFor, startWorkerProcess, testSpace, waitUntil } from "./_support.ts";

async function readyz(
  port: number,
): Promise<{ code: number; body: { status: string; checks: Record<string, string> } }> {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { code: res.status, body: (await res.json()) as { status: string; checks: Record<string, string> } };
}

test("a second worker process under a live instance id finds it taken: an error once, /readyz 503 on `instance_taken`, ready once the first stops", async () => {
  const space = testSpace();
  const redis = redisFor();
  const common = {
    TURNSTREAM_PREFIX: space.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
    TURNSTREAM_WORKSPACE_ROOTS: space.workspace(),
    TURNSTREAM_INSTANCE_ID: "twin",
  };
  const first = await startWorkerProcess({ ...common, TURNSTREAM_INSTANCE_ROOT: space.dir("host-a") });
  const second = await startWorkerProcess({
    ...common,
    TURNSTREAM_INSTANCE_ROOT: space.dir("host-b"),
    TURNSTREAM_OPS_PORT: "0",
  });
  try {
    const clash = await second.waitFor(
      (line) =>
        line["msg"] ===
        "another process is running as this instance: give each worker process its own instance id (TURNSTREAM_INSTANCE_ID)",
      20_000,
      "the clash logged",
    );
    assert.equal(clash["level"], 50, "logged as an error");
    assert.equal((clash["other"] as { pid: number }).pid, first.pid, "names the process holding the id");
    const listening = await second.waitFor(
      (l) => typeof l["port"] === "number" && /ops endpoint listening/.test(String(l["msg"])),
      20_000,
      "the ops endpoint",
    );
    const port = listening["port"] as number;
    const taken = await readyz(port);
    assert.equal(taken.code, 503);
    assert.match(taken.body.checks["instance_taken"] ?? "", /another process holds this instance id/);
    const listed = await readWorkers(redis, space.logPrefix);
    assert.deepEqual(
      listed.map((w) => [w.id, w.pid]),
      [["twin", first.pid]],
      "the registry keeps the first holder",
    );

    first.kill("SIGTERM");
    await first.exited;
    // The first removed its entry on the way out; the second's next beat takes the id.
    await waitUntil(async () => (await readyz(port)).code === 200, 30_000, "the second worker to become ready");
    assert.deepEqual(
      (await readWorkers(redis, space.logPrefix)).map((w) => w.pid),
      [second.pid],
    );
    const errors = second.lines.filter((l) =>
      String(l["msg"]).startsWith("another process is running as this instance"),
    );
    assert.equal(errors.length, 1, "the clash is said once, not every beat");
  } finally {
    first.kill("SIGKILL");
    second.kill("SIGTERM");
    await second.exited;
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
