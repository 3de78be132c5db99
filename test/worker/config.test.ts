// Worker settings from the environment: the snapshot cache size (MiB, 0 = off) and errors that name
// the variable to change.
import { test } from "node:test";
import assert from "node:assert/strict";
import { compileWorkerOptions, WORKER_DEFAULTS, workerConfigFromEnv, WorkerConfigError } from "../../src/worker/index.ts";

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

test("TURNSTREAM_ALLOW_ENV, TURNSTREAM_WORKSPACE_TRUST, TURNSTREAM_MCP_CONFIG: safe defaults, and a gate no setting can open", () => {
  const cfg = compileWorkerOptions(workerConfigFromEnv(base));
  assert.deepEqual([[...cfg.allowEnv], cfg.workspaceTrust, cfg.mcpConfigFile], [[], "never", undefined]);
  const set = compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_ALLOW_ENV: "PATH,ANTHROPIC_BASE_URL", TURNSTREAM_WORKSPACE_TRUST: "job", TURNSTREAM_MCP_CONFIG: "/etc/ts/mcp.json" }));
  assert.deepEqual([[...set.allowEnv], set.workspaceTrust, set.mcpConfigFile], [["PATH", "ANTHROPIC_BASE_URL"], "job", "/etc/ts/mcp.json"]);
  const refused = (env: Record<string, string>, variable: string, message: RegExp) =>
    assert.throws(() => workerConfigFromEnv({ ...base, ...env }), (err: unknown) => err instanceof WorkerConfigError && err.variable === variable && message.test(err.message));
  refused({ TURNSTREAM_ALLOW_ENV: "PATH,NODE_OPTIONS" }, "TURNSTREAM_ALLOW_ENV", /NODE_OPTIONS cannot be allowed/);
  refused({ TURNSTREAM_WORKSPACE_TRUST: "always" }, "TURNSTREAM_WORKSPACE_TRUST", /never.*job/);
  refused({ TURNSTREAM_MCP_CONFIG: "mcp.json" }, "TURNSTREAM_MCP_CONFIG", /absolute/);
});

test("TURNSTREAM_KEEP_RAW_LINES, TURNSTREAM_MAX_OUTPUT_LINES, TURNSTREAM_MAX_OUTPUT_MB: scrubbed and bounded by default, refused by name when malformed", () => {
  const cfg = compileWorkerOptions(workerConfigFromEnv(base));
  assert.deepEqual([cfg.keepRawLines, cfg.maxOutputLines, cfg.maxOutputBytes], [false, 100_000, 256 * 1024 * 1024]);
  const set = compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_KEEP_RAW_LINES: "1", TURNSTREAM_MAX_OUTPUT_LINES: "5000", TURNSTREAM_MAX_OUTPUT_MB: "64" }));
  assert.deepEqual([set.keepRawLines, set.maxOutputLines, set.maxOutputBytes], [true, 5000, 64 * 1024 * 1024]);
  for (const [variable, bad] of [["TURNSTREAM_KEEP_RAW_LINES", "yes"], ["TURNSTREAM_MAX_OUTPUT_LINES", "0"], ["TURNSTREAM_MAX_OUTPUT_MB", "1.5"]] as const) {
    assert.throws(() => workerConfigFromEnv({ ...base, [variable]: bad }), (err: unknown) => err instanceof WorkerConfigError && err.variable === variable);
  }
});

test("one compile step: the environment's options become the settings a worker runs with, unset ones from the defaults", () => {
  const cfg = workerConfigFromEnv({ ...base, TURNSTREAM_CONCURRENCY: "3", TURNSTREAM_LEASE_MS: "9000", TURNSTREAM_SNAPSHOT_CACHE_MB: "0", TURNSTREAM_INSTANCE_ID: "inst-7" });
  const settings = compileWorkerOptions(cfg);
  assert.deepEqual(
    [settings.concurrency, settings.leaseMs, settings.snapshotCacheBytes, settings.lockDuration, settings.stalledInterval, settings.queueName, settings.logPrefix],
    [3, 9000, 0, WORKER_DEFAULTS.lockDuration, WORKER_DEFAULTS.stalledInterval, WORKER_DEFAULTS.queueName, WORKER_DEFAULTS.logPrefix],
  );
  assert.equal(settings.instanceId, cfg.instanceId, "the environment's instance id is kept");
  assert.throws(() => compileWorkerOptions({ ...cfg, maxOutputLines: 0 }), /maxOutputLines must be a positive integer/);
  assert.throws(() => compileWorkerOptions({ ...cfg, workspaceRoots: [] }), /workspaceRoots must list at least one directory/);
});

test("TURNSTREAM_INSTANCE_ID and TURNSTREAM_SWEEP_INTERVAL_MS: unset until the worker claims an id; the interval is whole ms, 0 allowed", () => {
  const cfg = workerConfigFromEnv(base);
  assert.deepEqual([cfg.instanceId, cfg.sweepIntervalMs], [undefined, undefined]);
  assert.deepEqual(workerConfigFromEnv({ ...base, TURNSTREAM_INSTANCE_ID: "pod-a", TURNSTREAM_SWEEP_INTERVAL_MS: "0" }).sweepIntervalMs, 0);
  assert.equal(workerConfigFromEnv({ ...base, TURNSTREAM_SWEEP_INTERVAL_MS: "60000" }).sweepIntervalMs, 60000);
  for (const [variable, bad] of [["TURNSTREAM_SWEEP_INTERVAL_MS", "5m"], ["TURNSTREAM_SWEEP_INTERVAL_MS", "-1"], ["TURNSTREAM_INSTANCE_ID", "../x"]] as const) {
    assert.throws(() => workerConfigFromEnv({ ...base, [variable]: bad }), (err: unknown) => err instanceof WorkerConfigError && err.variable === variable);
  }
});

test("TURNSTREAM_GATEWAY: broker by default (runs never hold the model credential), passthrough by name, anything else refused", () => {
  assert.equal(compileWorkerOptions(workerConfigFromEnv(base)).gateway, "broker");
  assert.equal(compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_GATEWAY: "passthrough" })).gateway, "passthrough");
  assert.throws(
    () => workerConfigFromEnv({ ...base, TURNSTREAM_GATEWAY: "off" }),
    (err: unknown) => err instanceof WorkerConfigError && err.variable === "TURNSTREAM_GATEWAY" && /broker.*passthrough/.test(err.message),
  );
});
