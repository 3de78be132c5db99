// One error base: every error class in src/ extends TurnstreamError (directly or through another of
// ours), so each carries a `code` and `retryable`, and its `name` is its class's own name.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { repoRoot } from "../support/build.ts";
import { TurnstreamError } from "../../src/kernel/index.ts";
import { LostSessionError, LimitExceededError, NoAuthError } from "../../src/runner/index.ts";
import { LaunchError } from "../../src/runner/containment.ts";
import { RedisUnavailableError } from "../../src/log/redis-errors.ts";
import { FencedError } from "../../src/log/index.ts";
import { BadCwdError, WorkspaceNotAllowedError } from "../../src/worker/workspace.ts";
import { WaitTimeoutError } from "../../src/queue/index.ts";

test("no error class in src/ extends Error directly: TurnstreamError is the one base", () => {
  const direct: string[] = [];
  const src = join(repoRoot, "src");
  for (const entry of readdirSync(src, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".ts")) continue;
    const file = join(entry.parentPath, entry.name);
    for (const match of readFileSync(file, "utf8").matchAll(/class (\w+) extends Error\b/g))
      direct.push(`${relative(repoRoot, file)}: ${match[1]}`);
  }
  assert.deepEqual(direct, ["src/kernel/errors.ts: TurnstreamError"]);
});

test("name is the class's own, code and retryable are set, the fields stay as they were", () => {
  const lost = new LostSessionError("s-1", undefined, {});
  assert.deepEqual(
    [lost.name, lost.code, lost.kind, lost.retryable],
    ["LostSessionError", "lost_session", "lost_session", false],
  );
  const limit = new LimitExceededError("limit_memory", "512 MiB");
  assert.deepEqual([limit.name, limit.code, limit.retryable], ["LimitExceededError", "limit_memory", false]);
  assert.equal(new NoAuthError("/x").code, "auth");
  const launch = new LaunchError("ENOENT", "sh");
  assert.deepEqual([launch.name, launch.code, launch.retryable], ["LaunchError", "ENOENT", false]);
  const redis = new RedisUnavailableError("redis://127.0.0.1:1", "unreachable", undefined, { code: "ECONNREFUSED" });
  assert.deepEqual([redis.name, redis.code, redis.retryable], ["RedisUnavailableError", "ECONNREFUSED", true]);
  const fenced = new FencedError("s", 1, 2);
  assert.deepEqual([fenced.name, fenced.code, fenced.epoch, fenced.currentEpoch], ["FencedError", "fenced", 1, 2]);
  const outside = new WorkspaceNotAllowedError(["/w"]);
  assert.deepEqual(
    [outside.kind, outside.code, outside.retryable],
    ["workspace_not_allowed", "workspace_not_allowed", false],
  );
  assert.equal(new BadCwdError("/x", "does not exist", "w1").code, "bad_cwd");
  assert.equal(new WaitTimeoutError("t", 10).retryable, true);
  for (const err of [lost, limit, launch, redis, fenced, outside]) {
    assert.ok(err instanceof TurnstreamError && err instanceof Error);
    assert.ok(Object.hasOwn(err, "name"), `${err.name}: name is an own property, as a class field made it`);
  }
});
