// Worker configuration from the process environment (`turnstream worker`, workers/turn-worker.ts):
// the part of TurnWorkerOptions a variable sets, checked here so a bad value stops the start naming
// the variable.
import { resolve } from "node:path";
import { z } from "zod";
import { OperatorKeyError, operatorKeyLinesFromEnv, parseOperatorKeys } from "../decisions/index.ts";
import { checkAllowEnv } from "../queue/index.ts";
import type { WorkerEnvConfig } from "./options.ts";

const intFrom = (name: string) =>
  z
    .string()
    .regex(/^\d+$/, `${name} must be a positive integer`)
    .transform(Number)
    .refine((n) => n > 0, `${name} must be a positive integer`)
    .optional();

const envSchema = z.object({
  TURNSTREAM_WORKSPACE_ROOTS: z.string().min(1, "TURNSTREAM_WORKSPACE_ROOTS must list at least one absolute directory (colon-separated)"),
  TURNSTREAM_CONCURRENCY: intFrom("TURNSTREAM_CONCURRENCY"),
  TURNSTREAM_INSTANCE_ID: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/).optional(),
  TURNSTREAM_INSTANCE_ROOT: z.string().startsWith("/").optional(),
  TURNSTREAM_SWEEP_INTERVAL_MS: z.string().regex(/^\d+$/, "TURNSTREAM_SWEEP_INTERVAL_MS must be a whole number of ms (0 turns the periodic sweep off)").transform(Number).optional(),
  TURNSTREAM_SANDBOXED: z.enum(["0", "1", "true", "false"]).optional(),
  TURNSTREAM_LEASE_MS: intFrom("TURNSTREAM_LEASE_MS"),
  TURNSTREAM_LOCK_MS: intFrom("TURNSTREAM_LOCK_MS"),
  TURNSTREAM_STALLED_INTERVAL_MS: intFrom("TURNSTREAM_STALLED_INTERVAL_MS"),
  TURNSTREAM_PREFIX: z.string().optional(),
  TURNSTREAM_QUEUE_PREFIX: z.string().optional(),
  TURNSTREAM_QUEUE_NAME: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/).optional(),
  CLAUDE_BIN: z.string().min(1).optional(),
  TURNSTREAM_ALLOW_ENV: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*(,[A-Za-z_][A-Za-z0-9_]*)*$/, "TURNSTREAM_ALLOW_ENV is a comma-separated list of variable names").optional(),
  "TURNSTREAM_WORKSPACE_TRUST": z.enum(["never", "job"], "TURNSTREAM_WORKSPACE_TRUST is `never` (default) or `job`").optional(),
  "TURNSTREAM_MCP_CONFIG": z.string().startsWith("/", "TURNSTREAM_MCP_CONFIG must be an absolute path").optional(),
  TURNSTREAM_OPERATOR_KEYS: z.string().optional(),
  "TURNSTREAM_KEEP_RAW_LINES": z.enum(["0", "1", "true", "false"], "TURNSTREAM_KEEP_RAW_LINES is 1 (keep cli.line text unscrubbed) or 0 (default)").optional(),
  TURNSTREAM_MAX_OUTPUT_LINES: intFrom("TURNSTREAM_MAX_OUTPUT_LINES"),
  TURNSTREAM_MAX_OUTPUT_MB: intFrom("TURNSTREAM_MAX_OUTPUT_MB"),
  TURNSTREAM_WARM: z.enum(["0", "1", "true", "false"], "TURNSTREAM_WARM is 1 (every turn runs warm) or 0 (default: only turns that ask)").optional(),
  TURNSTREAM_WARM_IDLE_MS: intFrom("TURNSTREAM_WARM_IDLE_MS"),
  TURNSTREAM_WARM_MAX: intFrom("TURNSTREAM_WARM_MAX"),
  TURNSTREAM_WARM_MAX_RSS_MB: intFrom("TURNSTREAM_WARM_MAX_RSS_MB"),
  TURNSTREAM_GATEWAY: z.enum(["broker", "passthrough"], "TURNSTREAM_GATEWAY is `broker` (default: runs never hold the worker's model credential) or `passthrough`").optional(),
  "TURNSTREAM_SNAPSHOT_CACHE_MB": z.string().regex(/^\d+$/, "TURNSTREAM_SNAPSHOT_CACHE_MB must be a whole number of MiB (0 turns the cache off)").transform(Number).optional(),
});

export class WorkerConfigError extends Error {
  override readonly name = "WorkerConfigError";
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`worker configuration: ${variable}: ${problem}`);
    this.variable = variable;
  }
}

export function parseWorkspaceRoots(value: string): string[] {
  const roots = value
    .split(":")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  for (const r of roots) {
    if (!r.startsWith("/")) throw new WorkerConfigError("TURNSTREAM_WORKSPACE_ROOTS", `${JSON.stringify(r)} is not an absolute path`);
  }
  if (roots.length === 0) throw new WorkerConfigError("TURNSTREAM_WORKSPACE_ROOTS", "list at least one absolute directory");
  return roots.map((r) => resolve(r));
}

function allowEnvFrom(value: string | undefined): string[] {
  const names = value === undefined ? [] : value.split(",");
  try {
    checkAllowEnv(names);
  } catch (err) {
    throw new WorkerConfigError("TURNSTREAM_ALLOW_ENV", (err as Error).message);
  }
  return names;
}

/** The trusted operator keys: a file of them or the keys inline, checked here so a bad key stops the start. */
function operatorKeysFrom(value: string | undefined): string[] | undefined {
  try {
    const lines = operatorKeyLinesFromEnv(value);
    if (lines !== undefined) parseOperatorKeys(lines, "TURNSTREAM_OPERATOR_KEYS");
    return lines;
  } catch (err) {
    if (err instanceof OperatorKeyError) throw new WorkerConfigError("TURNSTREAM_OPERATOR_KEYS", err.message);
    throw err;
  }
}

/**
 * Reads the worker's options from the environment (REDIS_URL / REDIS_CLUSTER_NODES are read by
 * connectRedis). Unset variables stay undefined: the defaults are compileWorkerOptions'.
 */
export function workerConfigFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): WorkerEnvConfig {
  const r = envSchema.safeParse(env);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new WorkerConfigError(String(i.path[0] ?? "env"), i.message);
  }
  const e = r.data;
  return {
    workspaceRoots: parseWorkspaceRoots(e.TURNSTREAM_WORKSPACE_ROOTS),
    concurrency: e.TURNSTREAM_CONCURRENCY,
    // Unset: the worker takes the lowest free worker-<host>-<n> when it starts (housekeeping.ts).
    instanceId: e.TURNSTREAM_INSTANCE_ID,
    instanceRoot: e.TURNSTREAM_INSTANCE_ROOT,
    sweepIntervalMs: e.TURNSTREAM_SWEEP_INTERVAL_MS,
    sandboxed: e.TURNSTREAM_SANDBOXED === "1" || e.TURNSTREAM_SANDBOXED === "true",
    leaseMs: e.TURNSTREAM_LEASE_MS,
    lockDuration: e.TURNSTREAM_LOCK_MS,
    stalledInterval: e.TURNSTREAM_STALLED_INTERVAL_MS,
    logPrefix: e.TURNSTREAM_PREFIX,
    queuePrefix: e.TURNSTREAM_QUEUE_PREFIX,
    queueName: e.TURNSTREAM_QUEUE_NAME,
    claudeBin: e.CLAUDE_BIN,
    snapshotCacheBytes: e["TURNSTREAM_SNAPSHOT_CACHE_MB"] === undefined ? undefined : e["TURNSTREAM_SNAPSHOT_CACHE_MB"] * 1024 * 1024,
    allowEnv: allowEnvFrom(e.TURNSTREAM_ALLOW_ENV),
    workspaceTrust: e.TURNSTREAM_WORKSPACE_TRUST,
    mcpConfigFile: e.TURNSTREAM_MCP_CONFIG,
    operatorKeys: operatorKeysFrom(e.TURNSTREAM_OPERATOR_KEYS),
    keepRawLines: e.TURNSTREAM_KEEP_RAW_LINES === "1" || e.TURNSTREAM_KEEP_RAW_LINES === "true",
    maxOutputLines: e.TURNSTREAM_MAX_OUTPUT_LINES,
    maxOutputBytes: e.TURNSTREAM_MAX_OUTPUT_MB === undefined ? undefined : e.TURNSTREAM_MAX_OUTPUT_MB * 1024 * 1024,
    warm: e.TURNSTREAM_WARM === "1" || e.TURNSTREAM_WARM === "true",
    warmIdleMs: e.TURNSTREAM_WARM_IDLE_MS,
    warmMaxProcesses: e.TURNSTREAM_WARM_MAX,
    warmMaxRssBytes: e.TURNSTREAM_WARM_MAX_RSS_MB === undefined ? undefined : e.TURNSTREAM_WARM_MAX_RSS_MB * 1024 * 1024,
    gateway: e.TURNSTREAM_GATEWAY,
  };
}
