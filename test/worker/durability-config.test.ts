// TURNSTREAM_DURABILITY as a worker reads it: a malformed value is refused by name, and a worker
// process told `fsync` refuses to start on a Redis 7.0 that does not fsync every write, saying which
// settings to change (no turn is ever taken at a level the server cannot give).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DurabilityError } from "../../src/log/index.ts";
import { Redis } from "ioredis";
import { compileWorkerOptions, workerConfigFromEnv } from "../../src/worker/index.ts";
import { runWorkerMain } from "../../src/worker/main.ts";
import { startRedisServer } from "../support/redis-server.ts";

test("TURNSTREAM_DURABILITY / durability: malformed values are refused by name", () => {
  for (const bad of ["replicas:0", "replicas:1 ", "fsync;CONFIG SET", "always"]) {
    assert.throws(
      () => workerConfigFromEnv({ TURNSTREAM_WORKSPACE_ROOTS: "/tmp", TURNSTREAM_DURABILITY: bad }),
      /worker configuration: TURNSTREAM_DURABILITY: TURNSTREAM_DURABILITY=.* is not a durability level: use memory/,
      bad,
    );
    assert.throws(
      () => compileWorkerOptions({ workspaceRoots: ["/tmp"], durability: bad }),
      /durability \(TURNSTREAM_DURABILITY\)=.* is not a durability level/,
      bad,
    );
  }
  assert.equal(
    workerConfigFromEnv({ TURNSTREAM_WORKSPACE_ROOTS: "/tmp", TURNSTREAM_DURABILITY: "replicas:2" }).durability,
    "replicas:2",
  );
  assert.deepEqual(compileWorkerOptions({ workspaceRoots: ["/tmp"] }).durability, { level: "memory" });
});

test(
  "a worker told fsync refuses to start on a Redis < 7.2 without appendfsync always, naming the settings",
  { timeout: 60_000 },
  async (testContext) => {
    const server = await startRedisServer({ args: ["--appendonly", "yes", "--appendfsync", "everysec"] });
    const root = mkdtempSync(join(tmpdir(), "ts-dur-"));
    testContext.after(async () => {
      await server.dispose();
      rmSync(root, { recursive: true, force: true });
    });
    const probe = new Redis(server.url);
    const version = /redis_version:(\d+)\.(\d+)/.exec(await probe.info("server"))!;
    probe.disconnect();
    if (Number(version[1]) > 7 || (Number(version[1]) === 7 && Number(version[2]) >= 2)) {
      testContext.diagnostic("this redis-server has WAITAOF: fsync is confirmed per batch, nothing to refuse");
      return;
    }
    const env = {
      REDIS_URL: server.url,
      TURNSTREAM_WORKSPACE_ROOTS: root,
      TURNSTREAM_INSTANCE_ROOT: join(root, "inst"),
      TURNSTREAM_DURABILITY: "fsync",
      LOG_LEVEL: "silent",
    };
    const err = await runWorkerMain({ env }).then(
      () => assert.fail("the worker started"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof DurabilityError, String(err));
    assert.match(
      err.message,
      /TURNSTREAM_DURABILITY=fsync: Redis 7\.0 at redis:\/\/127\.0\.0\.1:\d+ has no WAITAOF \(7\.2\+\), and its appendonly is "yes", appendfsync "everysec"; set appendonly yes and appendfsync always/,
    );
  },
);
