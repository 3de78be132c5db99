// Worker settings from the environment: the snapshot cache size (MiB, 0 = off) and errors that name
// the variable to change.
import { test } from "node:test";
import assert from "node:assert/strict";
import { workerConfigFromEnv, WorkerConfigError } from "../../src/worker/index.ts";

const base = { TURNSTREAM_WORKSPACE_ROOTS: "/work/a:/work/b" };

test("TURNSTREAM_SNAPSHOT_CACHE_MB: default unset, MiB to bytes, 0 turns it off, anything else refused by name", () => {
  assert.equal(workerConfigFromEnv(base).snapshotCacheBytes, undefined);
  assert.equal(workerConfigFromEnv({ ...base, TURNSTREAM_SNAPSHOT_CACHE_MB: "16" }).snapshotCacheBytes, 16 * 1024 * 1024);
  assert.equal(workerConfigFromEnv({ ...base, TURNSTREAM_SNAPSHOT_CACHE_MB: "0" }).snapshotCacheBytes, 0);
  for (const bad of ["-1", "1.5", "lots"]) {
    assert.throws(
      () => workerConfigFromEnv({ ...base, TURNSTREAM_SNAPSHOT_CACHE_MB: bad }),
      (err: unknown) => err instanceof WorkerConfigError && err.variable === "TURNSTREAM_SNAPSHOT_CACHE_MB" && /whole number of MiB/.test(err.message),
    );
  }
  assert.deepEqual(workerConfigFromEnv(base).workspaceRoots, ["/work/a", "/work/b"]);
});
