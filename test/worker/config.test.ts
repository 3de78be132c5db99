// Worker settings from the environment, errors that name the variable to change, and the tuning
// that only the library's options set.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_JOB_ENV_ALLOW } from "../../src/queue/index.ts";
import {
  compileWorkerOptions,
  WORKER_DEFAULTS,
  workerConfigFromEnv,
  WorkerConfigError,
} from "../../src/worker/index.ts";

const base = { TURNSTREAM_WORKSPACE_ROOTS: "/work/a:/work/b" };

test("the removed tuning variables are read no more: set or malformed, the options stay the defaults", () => {
  const tuning = {
    TURNSTREAM_LEASE_MS: "9000",
    TURNSTREAM_LOCK_MS: "x",
    TURNSTREAM_STALLED_INTERVAL_MS: "1000",
    TURNSTREAM_SNAPSHOT_CACHE_MB: "0",
    TURNSTREAM_SWEEP_INTERVAL_MS: "5m",
    TURNSTREAM_MAX_OUTPUT_LINES: "5000",
    TURNSTREAM_MAX_OUTPUT_MB: "1.5",
    TURNSTREAM_WARM_IDLE_MS: "1500",
    TURNSTREAM_WARM_MAX: "2",
    TURNSTREAM_WARM_MAX_RSS_MB: "64",
  };
  const settings = compileWorkerOptions(workerConfigFromEnv({ ...base, ...tuning }));
  assert.deepEqual(
    [
      settings.leaseMs,
      settings.lockDuration,
      settings.stalledInterval,
      settings.snapshotCacheBytes,
      settings.maxOutputLines,
      settings.maxOutputBytes,
      settings.warm,
    ],
    [
      WORKER_DEFAULTS.leaseMs,
      WORKER_DEFAULTS.lockDuration,
      WORKER_DEFAULTS.stalledInterval,
      WORKER_DEFAULTS.snapshotCacheBytes,
      WORKER_DEFAULTS.maxOutputLines,
      WORKER_DEFAULTS.maxOutputBytes,
      WORKER_DEFAULTS.warm,
    ],
  );
  assert.deepEqual(workerConfigFromEnv(base).workspaceRoots, ["/work/a", "/work/b"]);
});

test("TURNSTREAM_WARM is the warm pool's one switch; its bounds are the library's warm option", () => {
  assert.equal(compileWorkerOptions(workerConfigFromEnv(base)).warm.all, false);
  assert.equal(compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_WARM: "1" })).warm.all, true);
  const warm = compileWorkerOptions({ ...workerConfigFromEnv(base), warm: { idleTtlMs: 1500, maxProcesses: 2 } }).warm;
  assert.deepEqual(
    [warm.all, warm.idleTtlMs, warm.maxProcesses, warm.maxRssBytes],
    [false, 1500, 2, WORKER_DEFAULTS.warm.maxRssBytes],
  );
  assert.throws(
    () => compileWorkerOptions({ ...workerConfigFromEnv(base), warm: { maxProcesses: 0 } }),
    /warm.maxProcesses must be a positive integer/,
  );
  assert.throws(
    () => workerConfigFromEnv({ ...base, TURNSTREAM_WARM: "yes" }),
    (err: unknown) => err instanceof WorkerConfigError && err.variable === "TURNSTREAM_WARM",
  );
});

test("TURNSTREAM_JOB_ENV_ALLOW, TURNSTREAM_WORKSPACE_TRUST, TURNSTREAM_MCP_CONFIG: safe defaults, and a gate no setting can open", () => {
  const cfg = compileWorkerOptions(workerConfigFromEnv(base));
  assert.deepEqual(
    [cfg.jobEnv.entries, cfg.workspaceTrust, cfg.mcpConfigFile],
    [DEFAULT_JOB_ENV_ALLOW, "never", undefined],
  );
  const set = compileWorkerOptions(
    workerConfigFromEnv({
      ...base,
      TURNSTREAM_JOB_ENV_ALLOW: "CI,DEPLOY_*",
      TURNSTREAM_WORKSPACE_TRUST: "job",
      TURNSTREAM_MCP_CONFIG: "/etc/ts/mcp.json",
    }),
  );
  assert.deepEqual(
    [set.jobEnv.entries, set.workspaceTrust, set.mcpConfigFile],
    [["CI", "DEPLOY_*"], "job", "/etc/ts/mcp.json"],
  );
  assert.deepEqual(
    compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_JOB_ENV_ALLOW: "" })).jobEnv.entries,
    [],
    "empty: a job sets nothing",
  );
  // The older variable adds names to the list that applies.
  const older = compileWorkerOptions(
    workerConfigFromEnv({
      ...base,
      TURNSTREAM_JOB_ENV_ALLOW: "CI",
      TURNSTREAM_ALLOW_ENV: "GREETING,ANTHROPIC_BASE_URL",
    }),
  );
  assert.deepEqual(older.jobEnv.entries, ["CI", "GREETING", "ANTHROPIC_BASE_URL"]);
  const refused = (env: Record<string, string>, variable: string, message: RegExp) =>
    assert.throws(
      () => workerConfigFromEnv({ ...base, ...env }),
      (err: unknown) => err instanceof WorkerConfigError && err.variable === variable && message.test(err.message),
    );
  refused({ TURNSTREAM_ALLOW_ENV: "GREETING,NODE_OPTIONS" }, "TURNSTREAM_ALLOW_ENV", /NODE_OPTIONS cannot be allowed/);
  refused({ TURNSTREAM_JOB_ENV_ALLOW: "CI,PATH" }, "TURNSTREAM_JOB_ENV_ALLOW", /PATH cannot be allowed/);
  refused({ TURNSTREAM_JOB_ENV_ALLOW: "BUN_*" }, "TURNSTREAM_JOB_ENV_ALLOW", /BUN_\* cannot be allowed/);
  refused(
    { TURNSTREAM_JOB_ENV_ALLOW: "CLAUDE_CODE_*" },
    "TURNSTREAM_JOB_ENV_ALLOW",
    /CLAUDE_CODE_\* cannot be allowed: it admits names that can never be set/,
  );
  refused({ TURNSTREAM_JOB_ENV_ALLOW: "*" }, "TURNSTREAM_JOB_ENV_ALLOW", /comma-separated/);
  refused({ TURNSTREAM_JOB_ENV_ALLOW: "X*" }, "TURNSTREAM_JOB_ENV_ALLOW", /too broad/);
  refused({ TURNSTREAM_WORKSPACE_TRUST: "always" }, "TURNSTREAM_WORKSPACE_TRUST", /never.*job/);
  refused({ TURNSTREAM_MCP_CONFIG: "mcp.json" }, "TURNSTREAM_MCP_CONFIG", /absolute/);
});

test("TURNSTREAM_RUN_ENV: the named worker variables, read at start, reach every run; a name the worker lacks stops the start", () => {
  const cfg = workerConfigFromEnv({
    ...base,
    TURNSTREAM_RUN_ENV: "GH_HOST,MAX_THINKING_TOKENS",
    GH_HOST: "ghe.example",
    MAX_THINKING_TOKENS: "0",
    OTHER: "x",
  });
  assert.deepEqual(cfg.runEnv, { GH_HOST: "ghe.example", MAX_THINKING_TOKENS: "0" });
  assert.equal(workerConfigFromEnv(base).runEnv, undefined);
  assert.throws(
    () => workerConfigFromEnv({ ...base, TURNSTREAM_RUN_ENV: "GH_HOST" }),
    (err: unknown) =>
      err instanceof WorkerConfigError &&
      err.variable === "TURNSTREAM_RUN_ENV" &&
      /GH_HOST is not set/.test(err.message),
  );
});

test("TURNSTREAM_KEEP_RAW_LINES: scrubbed by default, 1 keeps raw lines, refused by name when malformed; output is bounded", () => {
  const cfg = compileWorkerOptions(workerConfigFromEnv(base));
  assert.deepEqual([cfg.keepRawLines, cfg.maxOutputLines, cfg.maxOutputBytes], [false, 100_000, 256 * 1024 * 1024]);
  assert.equal(
    compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_KEEP_RAW_LINES: "1" })).keepRawLines,
    true,
  );
  assert.throws(
    () => workerConfigFromEnv({ ...base, TURNSTREAM_KEEP_RAW_LINES: "yes" }),
    (err: unknown) => err instanceof WorkerConfigError && err.variable === "TURNSTREAM_KEEP_RAW_LINES",
  );
});

test("one compile step: the environment's options become the settings a worker runs with, unset ones from the defaults", () => {
  const cfg = workerConfigFromEnv({ ...base, TURNSTREAM_CONCURRENCY: "3", TURNSTREAM_INSTANCE_ID: "inst-7" });
  // The library's options over the environment's, as a program that runs a worker passes them.
  const settings = compileWorkerOptions({ ...cfg, leaseMs: 9000, snapshotCacheBytes: 0 });
  assert.deepEqual(
    [
      settings.concurrency,
      settings.leaseMs,
      settings.snapshotCacheBytes,
      settings.lockDuration,
      settings.stalledInterval,
      settings.queueName,
      settings.logPrefix,
    ],
    [
      3,
      9000,
      0,
      WORKER_DEFAULTS.lockDuration,
      WORKER_DEFAULTS.stalledInterval,
      WORKER_DEFAULTS.queueName,
      WORKER_DEFAULTS.logPrefix,
    ],
  );
  assert.equal(settings.instanceId, cfg.instanceId, "the environment's instance id is kept");
  assert.throws(() => compileWorkerOptions({ ...cfg, maxOutputLines: 0 }), /maxOutputLines must be a positive integer/);
  assert.throws(
    () => compileWorkerOptions({ ...cfg, workspaceRoots: [] }),
    /workspaceRoots must list at least one directory/,
  );
});

test("TURNSTREAM_INSTANCE_ID: unset until the worker claims an id; a path-like one refused by name", () => {
  assert.equal(workerConfigFromEnv(base).instanceId, undefined);
  assert.equal(workerConfigFromEnv({ ...base, TURNSTREAM_INSTANCE_ID: "pod-a" }).instanceId, "pod-a");
  assert.throws(
    () => workerConfigFromEnv({ ...base, TURNSTREAM_INSTANCE_ID: "../x" }),
    (err: unknown) => err instanceof WorkerConfigError && err.variable === "TURNSTREAM_INSTANCE_ID",
  );
});

test("TURNSTREAM_TOOL_SANDBOX*: on with no network by default, the worker's own files unreadable; malformed values refused by name", () => {
  const cfg = compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_INSTANCE_ROOT: "/srv/ts" }));
  assert.deepEqual([cfg.toolSandbox.mode, cfg.toolSandbox.allowDomains], ["on", []]);
  assert.ok(
    cfg.toolSandbox.denyRead.includes("/srv/ts"),
    "the instance root, where every run's home lives, is unreadable to tools",
  );
  const set = compileWorkerOptions(
    workerConfigFromEnv({
      ...base,
      TURNSTREAM_TOOL_SANDBOX: "off",
      TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS: "registry.npmjs.org,*.github.com",
      TURNSTREAM_TOOL_SANDBOX_DENY_READ: "/etc/ci:/opt/keys",
    }),
  );
  assert.deepEqual(
    [set.toolSandbox.mode, set.toolSandbox.allowDomains],
    ["off", ["registry.npmjs.org", "*.github.com"]],
  );
  assert.ok(set.toolSandbox.denyRead.includes("/etc/ci") && set.toolSandbox.denyRead.includes("/opt/keys"));
  const refused = (env: Record<string, string>, variable: string) =>
    assert.throws(
      () => workerConfigFromEnv({ ...base, ...env }),
      (err: unknown) => err instanceof WorkerConfigError && err.variable === variable,
    );
  refused({ TURNSTREAM_TOOL_SANDBOX: "no" }, "TURNSTREAM_TOOL_SANDBOX");
  refused({ TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS: "https://evil.example" }, "TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS");
  refused({ TURNSTREAM_TOOL_SANDBOX_DENY_READ: "relative/path" }, "TURNSTREAM_TOOL_SANDBOX_DENY_READ");
});

test("TURNSTREAM_GATEWAY: broker by default (runs never hold the model credential), passthrough by name, anything else refused", () => {
  assert.equal(compileWorkerOptions(workerConfigFromEnv(base)).gateway, "broker");
  assert.equal(
    compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_GATEWAY: "passthrough" })).gateway,
    "passthrough",
  );
  assert.throws(
    () => workerConfigFromEnv({ ...base, TURNSTREAM_GATEWAY: "off" }),
    (err: unknown) =>
      err instanceof WorkerConfigError &&
      err.variable === "TURNSTREAM_GATEWAY" &&
      /broker.*passthrough/.test(err.message),
  );
});

test("TURNSTREAM_TENANTS_SIGNED_ONLY: off by default, on with 1, anything else refused", () => {
  assert.equal(compileWorkerOptions(workerConfigFromEnv(base)).tenants.signedOnly, false);
  const on = compileWorkerOptions(workerConfigFromEnv({ ...base, TURNSTREAM_TENANTS_SIGNED_ONLY: "1" }));
  assert.equal(on.tenants.signedOnly, true);
  assert.throws(
    () => workerConfigFromEnv({ ...base, TURNSTREAM_TENANTS_SIGNED_ONLY: "yes" }),
    (err: Error) => err instanceof WorkerConfigError && /TURNSTREAM_TENANTS_SIGNED_ONLY/.test(err.message),
  );
});

test("TURNSTREAM_GATEWAY_COOLDOWN: on by default with its defaults, off by name; its hold maximum a duration or 0", () => {
  const cooldownOf = (env: Record<string, string>) =>
    compileWorkerOptions(workerConfigFromEnv({ ...base, ...env })).cooldown;
  assert.deepEqual(cooldownOf({}), { maxHoldMs: 60_000, baseBackoffMs: 1000, maxBackoffMs: 60_000 });
  assert.equal(cooldownOf({ TURNSTREAM_GATEWAY_COOLDOWN: "off" }), undefined);
  assert.equal(cooldownOf({ TURNSTREAM_GATEWAY_COOLDOWN_HOLD: "2m" })?.maxHoldMs, 120_000);
  assert.equal(cooldownOf({ TURNSTREAM_GATEWAY_COOLDOWN: "on", TURNSTREAM_GATEWAY_COOLDOWN_HOLD: "0" })?.maxHoldMs, 0);
  for (const [variable, value] of [
    ["TURNSTREAM_GATEWAY_COOLDOWN", "0"],
    ["TURNSTREAM_GATEWAY_COOLDOWN_HOLD", "soon"],
    ["TURNSTREAM_GATEWAY_COOLDOWN_HOLD", "-5s"],
  ] as const)
    assert.throws(
      () => workerConfigFromEnv({ ...base, [variable]: value }),
      (err: unknown) => err instanceof WorkerConfigError && err.variable === variable,
      `${variable}=${value}`,
    );
  // The backoff is tuning: options only, checked.
  const tuned = compileWorkerOptions({
    workspaceRoots: ["/w"],
    cooldown: { baseBackoffMs: 500, maxBackoffMs: 30_000 },
  });
  assert.deepEqual(tuned.cooldown, { maxHoldMs: 60_000, baseBackoffMs: 500, maxBackoffMs: 30_000 });
  assert.equal(compileWorkerOptions({ workspaceRoots: ["/w"], cooldown: false }).cooldown, undefined);
  assert.throws(
    () => compileWorkerOptions({ workspaceRoots: ["/w"], cooldown: { baseBackoffMs: 5000, maxBackoffMs: 1000 } }),
    /baseBackoffMs.*longer than.*maxBackoffMs/,
  );
  assert.throws(() => compileWorkerOptions({ workspaceRoots: ["/w"], cooldown: { maxHoldMs: -1 } }), /maxHoldMs/);
});
