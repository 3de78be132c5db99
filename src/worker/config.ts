// Worker configuration from the process environment (`turnstream worker`, workers/turn-worker.ts):
// the part of TurnWorkerOptions a variable sets, checked here so a bad value stops the start naming
// the variable. Pure tuning (lease, lock, caches, output caps, the warm pool's bounds) is left to the
// library's options: no operator should need to turn it.
import { parseDuration, TurnstreamError } from "../kernel/index.ts";
import { resolve } from "node:path";
import { z as zod } from "zod";
import { OperatorKeyError, operatorKeyLinesFromEnv, parseOperatorKeys } from "../decisions/index.ts";
import { compileJobEnvPolicy, queueConfigFromEnv } from "../queue/index.ts";
import { parseDurability } from "../log/index.ts";
import { runLimitsFromEnv } from "./limits.ts";
import type { ParkingOptions, WorkerEnvConfig } from "./options.ts";

const intFrom = (name: string) =>
  zod
    .string()
    .regex(/^\d+$/, `${name} must be a positive integer`)
    .transform(Number)
    .refine((n) => n > 0, `${name} must be a positive integer`)
    .optional();

// Names or PREFIX* patterns, comma-separated; empty is an empty list.
const ENV_LIST = /^([A-Za-z_][A-Za-z0-9_]*\*?(,[A-Za-z_][A-Za-z0-9_]*\*?)*)?$/;
const DOMAIN = String.raw`(\*\.)?[A-Za-z0-9][A-Za-z0-9-]{0,62}(\.[A-Za-z0-9][A-Za-z0-9-]{0,62})*`;
const DOMAIN_LIST = new RegExp(`^${DOMAIN}(,${DOMAIN})*$`);

const envSchema = zod.object({
  TURNSTREAM_WORKSPACE_ROOTS: zod
    .string()
    .min(1, "TURNSTREAM_WORKSPACE_ROOTS must list at least one absolute directory (colon-separated)"),
  TURNSTREAM_CONCURRENCY: intFrom("TURNSTREAM_CONCURRENCY"),
  TURNSTREAM_INSTANCE_ID: zod
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/)
    .optional(),
  TURNSTREAM_INSTANCE_ROOT: zod.string().startsWith("/").optional(),
  TURNSTREAM_SANDBOXED: zod.enum(["0", "1", "true", "false"]).optional(),
  TURNSTREAM_PREFIX: zod.string().optional(),
  TURNSTREAM_DURABILITY: zod.string().optional(),
  TURNSTREAM_QUEUE_PREFIX: zod.string().optional(),
  // Empty is unset, as everywhere these four are read (queueConfigFromEnv).
  TURNSTREAM_QUEUE_NAME: zod
    .string()
    .regex(/^(?:[A-Za-z0-9_.-]{1,64})?$/, "TURNSTREAM_QUEUE_NAME is 1-64 characters from A-Z a-z 0-9 _ . -")
    .optional(),
  CLAUDE_BIN: zod.string().min(1).optional(),
  TURNSTREAM_JOB_ENV_ALLOW: zod
    .string()
    .regex(ENV_LIST, "TURNSTREAM_JOB_ENV_ALLOW is a comma-separated list of names and PREFIX* patterns")
    .optional(),
  TURNSTREAM_ALLOW_ENV: zod
    .string()
    .regex(ENV_LIST, "TURNSTREAM_ALLOW_ENV is a comma-separated list of variable names")
    .optional(),
  TURNSTREAM_RUN_ENV: zod
    .string()
    .regex(ENV_LIST, "TURNSTREAM_RUN_ENV is a comma-separated list of variable names")
    .optional(),
  TURNSTREAM_WORKSPACE_TRUST: zod
    .enum(["never", "job"], "TURNSTREAM_WORKSPACE_TRUST is `never` (default) or `job`")
    .optional(),
  TURNSTREAM_MCP_CONFIG: zod.string().startsWith("/", "TURNSTREAM_MCP_CONFIG must be an absolute path").optional(),
  TURNSTREAM_OPERATOR_KEYS: zod.string().optional(),
  TURNSTREAM_TOOL_SANDBOX: zod
    .enum(
      ["on", "off"],
      "TURNSTREAM_TOOL_SANDBOX is `on` (default: untrusted turns run their tools in the sandbox or are refused) or `off`",
    )
    .optional(),
  TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS: zod
    .string()
    .regex(
      DOMAIN_LIST,
      "TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS is a comma-separated list of host names (example.com, *.example.com)",
    )
    .optional(),
  TURNSTREAM_TOOL_SANDBOX_DENY_READ: zod
    .string()
    .regex(/^\/[^:]*(:\/[^:]*)*$/, "TURNSTREAM_TOOL_SANDBOX_DENY_READ is a colon-separated list of absolute paths")
    .optional(),
  TURNSTREAM_KEEP_RAW_LINES: zod
    .enum(["0", "1", "true", "false"], "TURNSTREAM_KEEP_RAW_LINES is 1 (keep cli.line text unscrubbed) or 0 (default)")
    .optional(),
  TURNSTREAM_WARM: zod
    .enum(
      ["0", "1", "true", "false"],
      "TURNSTREAM_WARM is 1 (every turn runs warm) or 0 (default: only turns that ask)",
    )
    .optional(),
  TURNSTREAM_ANSWER_WINDOW: zod.string().optional(),
  TURNSTREAM_TENANT_BUDGET_USD: zod.coerce
    .number("TURNSTREAM_TENANT_BUDGET_USD is a number of USD, like 50")
    .positive("TURNSTREAM_TENANT_BUDGET_USD must be more than 0")
    .finite()
    .optional(),
  TURNSTREAM_TENANT_MAX_RUNNING: zod.coerce
    .number("TURNSTREAM_TENANT_MAX_RUNNING is a whole number of turns, like 4")
    .int("TURNSTREAM_TENANT_MAX_RUNNING is a whole number of turns, like 4")
    .positive("TURNSTREAM_TENANT_MAX_RUNNING must be 1 or more")
    .optional(),
  TURNSTREAM_TENANT_OVER_BUDGET: zod
    .enum(["wait", "fail"], "TURNSTREAM_TENANT_OVER_BUDGET is `wait` (default) or `fail`")
    .optional(),
  TURNSTREAM_TENANTS_SIGNED_ONLY: zod
    .enum(
      ["0", "1", "true", "false"],
      "TURNSTREAM_TENANTS_SIGNED_ONLY is 1 (run only turns of tenants with signed limits) or 0 (default)",
    )
    .optional(),
  TURNSTREAM_DECISION_DEADLINE: zod.string().optional(),
  TURNSTREAM_DECISION_DEADLINE_MAX: zod.string().optional(),
  TURNSTREAM_GATEWAY: zod
    .enum(
      ["broker", "passthrough"],
      "TURNSTREAM_GATEWAY is `broker` (default: runs never hold the worker's model credential) or `passthrough`",
    )
    .optional(),
  TURNSTREAM_GATEWAY_COOLDOWN: zod
    .enum(
      ["on", "off"],
      "TURNSTREAM_GATEWAY_COOLDOWN is `on` (default: a 429, 529 or 503 holds every worker's requests for that credential) or `off`",
    )
    .optional(),
  TURNSTREAM_GATEWAY_COOLDOWN_HOLD: zod.string().optional(),
  TURNSTREAM_CLI_TELEMETRY: zod
    .enum(
      ["on", "off"],
      "TURNSTREAM_CLI_TELEMETRY is `on` (default: with tracing on, the CLI's own spans join the attempt's trace) or `off`",
    )
    .optional(),
  TURNSTREAM_CLI_TELEMETRY_CONTENT: zod
    .enum(
      ["0", "1", "true", "false"],
      "TURNSTREAM_CLI_TELEMETRY_CONTENT is 1 (keep the prompt and tool texts of the CLI's spans, scrubbed) or 0 (default)",
    )
    .optional(),
});

export class WorkerConfigError extends TurnstreamError {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`worker configuration: ${variable}: ${problem}`, { code: "worker_config" });
    this.variable = variable;
  }
}

export function parseWorkspaceRoots(value: string): string[] {
  const roots = value
    .split(":")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  for (const root of roots) {
    if (!root.startsWith("/"))
      throw new WorkerConfigError("TURNSTREAM_WORKSPACE_ROOTS", `${JSON.stringify(root)} is not an absolute path`);
  }
  if (roots.length === 0)
    throw new WorkerConfigError("TURNSTREAM_WORKSPACE_ROOTS", "list at least one absolute directory");
  return roots.map((r) => resolve(r));
}

const listFrom = (value: string | undefined): string[] | undefined =>
  value === undefined ? undefined : value.split(",").filter((n) => n !== "");

/** A list of allow-list entries, checked here so one that can never be allowed stops the start, named. */
function envAllowFrom(variable: string, value: string | undefined): string[] | undefined {
  const entries = listFrom(value);
  try {
    compileJobEnvPolicy(entries ?? []);
  } catch (err) {
    throw new WorkerConfigError(variable, (err as Error).message);
  }
  return entries;
}

/** The worker variables every run gets (TURNSTREAM_RUN_ENV), read now: the worker's own configuration. */
function runEnvFrom(
  value: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string> | undefined {
  const names = listFrom(value);
  if (names === undefined) return undefined;
  const runEnv: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value === undefined) {
      throw new WorkerConfigError("TURNSTREAM_RUN_ENV", `${name} is not set in the worker's environment`);
    }
    runEnv[name] = value;
  }
  return runEnv;
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

/** The per-run limits (TURNSTREAM_MAX_PIDS, TURNSTREAM_MAX_MEMORY_MB, …), refused by name when malformed. */
/** TURNSTREAM_DURABILITY checked now (the worker parses it again into its settings). */
function durabilityFrom(text: string | undefined): string | undefined {
  try {
    parseDurability(text);
  } catch (err) {
    throw new WorkerConfigError("TURNSTREAM_DURABILITY", (err as Error).message);
  }
  return text;
}

function limitsFrom(env: Readonly<Record<string, string | undefined>>): WorkerEnvConfig["limits"] {
  try {
    return runLimitsFromEnv(env);
  } catch (err) {
    throw new WorkerConfigError(
      (err as { variable?: string }).variable ?? "TURNSTREAM_MAX_PIDS",
      (err as Error).message,
    );
  }
}

/**
 * Reads the worker's options from the environment (REDIS_URL / REDIS_CLUSTER_NODES are read by
 * connectRedis). Unset variables stay undefined: the defaults are compileWorkerOptions'.
 */
export function workerConfigFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): WorkerEnvConfig {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new WorkerConfigError(String(issue.path[0] ?? "env"), issue.message);
  }
  const vars = parsed.data;
  // Read as the commands and the library read them (an empty variable is unset).
  const place = queueConfigFromEnv(env);
  return {
    workspaceRoots: parseWorkspaceRoots(vars.TURNSTREAM_WORKSPACE_ROOTS),
    concurrency: vars.TURNSTREAM_CONCURRENCY,
    // Unset: the worker takes the lowest free worker-<host>-<n> when it starts (housekeeping.ts).
    instanceId: vars.TURNSTREAM_INSTANCE_ID,
    instanceRoot: vars.TURNSTREAM_INSTANCE_ROOT,
    sandboxed: vars.TURNSTREAM_SANDBOXED === "1" || vars.TURNSTREAM_SANDBOXED === "true",
    logPrefix: place.logPrefix,
    durability: durabilityFrom(place.durability),
    queuePrefix: place.queuePrefix,
    queueName: place.queueName,
    claudeBin: vars.CLAUDE_BIN,
    jobEnvAllow: envAllowFrom("TURNSTREAM_JOB_ENV_ALLOW", vars.TURNSTREAM_JOB_ENV_ALLOW),
    allowEnv: envAllowFrom("TURNSTREAM_ALLOW_ENV", vars.TURNSTREAM_ALLOW_ENV),
    runEnv: runEnvFrom(vars.TURNSTREAM_RUN_ENV, env),
    workspaceTrust: vars.TURNSTREAM_WORKSPACE_TRUST,
    toolSandbox: {
      mode: vars.TURNSTREAM_TOOL_SANDBOX,
      allowDomains: vars.TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS?.split(","),
      denyRead: vars.TURNSTREAM_TOOL_SANDBOX_DENY_READ?.split(":"),
    },
    mcpConfigFile: vars.TURNSTREAM_MCP_CONFIG,
    operatorKeys: operatorKeysFrom(vars.TURNSTREAM_OPERATOR_KEYS),
    keepRawLines: vars.TURNSTREAM_KEEP_RAW_LINES === "1" || vars.TURNSTREAM_KEEP_RAW_LINES === "true",
    limits: limitsFrom(env),
    warm: { all: vars.TURNSTREAM_WARM === "1" || vars.TURNSTREAM_WARM === "true" },
    gateway: vars.TURNSTREAM_GATEWAY,
    cooldown: cooldownFrom(vars.TURNSTREAM_GATEWAY_COOLDOWN, vars.TURNSTREAM_GATEWAY_COOLDOWN_HOLD),
    cliTelemetry: {
      enabled: vars.TURNSTREAM_CLI_TELEMETRY !== "off",
      content: vars.TURNSTREAM_CLI_TELEMETRY_CONTENT === "1" || vars.TURNSTREAM_CLI_TELEMETRY_CONTENT === "true",
    },
    parking: parkingFrom(vars),
    tenants: {
      defaults: {
        budgetUsd: vars.TURNSTREAM_TENANT_BUDGET_USD,
        maxRunning: vars.TURNSTREAM_TENANT_MAX_RUNNING,
        overBudget: vars.TURNSTREAM_TENANT_OVER_BUDGET,
      },
      signedOnly: vars.TURNSTREAM_TENANTS_SIGNED_ONLY === "1" || vars.TURNSTREAM_TENANTS_SIGNED_ONLY === "true",
    },
  };
}

/** TURNSTREAM_GATEWAY_COOLDOWN (`off` turns it off) and its hold maximum (a duration; `0` answers 429 at once). */
function cooldownFrom(mode: "on" | "off" | undefined, hold: string | undefined): WorkerEnvConfig["cooldown"] {
  if (mode === "off") return false;
  if (hold === undefined) return undefined;
  const maxHoldMs = hold.trim() === "0" ? 0 : parseDuration(hold);
  if (maxHoldMs === undefined)
    throw new WorkerConfigError(
      "TURNSTREAM_GATEWAY_COOLDOWN_HOLD",
      `${JSON.stringify(hold)} is not a duration like 30s or 2m (0: answer 429 at once)`,
    );
  return { maxHoldMs };
}

/** TURNSTREAM_ANSWER_WINDOW (a duration, `0`, or `off`: calls wait in the CLI), the deadline and its maximum. */
function parkingFrom(vars: {
  TURNSTREAM_ANSWER_WINDOW?: string | undefined;
  TURNSTREAM_DECISION_DEADLINE?: string | undefined;
  TURNSTREAM_DECISION_DEADLINE_MAX?: string | undefined;
}): ParkingOptions {
  const duration = (name: string, text: string | undefined): number | undefined => {
    if (text === undefined) return undefined;
    const ms = parseDuration(text);
    if (ms === undefined)
      throw new WorkerConfigError(name, `${JSON.stringify(text)} is not a duration like 5s, 8h or 7d`);
    return ms;
  };
  const window = vars.TURNSTREAM_ANSWER_WINDOW?.trim();
  const parking: ParkingOptions = {};
  if (window === "off") parking.enabled = false;
  else if (window === "0") parking.answerWindowMs = 0;
  else if (window !== undefined) parking.answerWindowMs = duration("TURNSTREAM_ANSWER_WINDOW", window);
  const deadline = duration("TURNSTREAM_DECISION_DEADLINE", vars.TURNSTREAM_DECISION_DEADLINE);
  const max = duration("TURNSTREAM_DECISION_DEADLINE_MAX", vars.TURNSTREAM_DECISION_DEADLINE_MAX);
  if (deadline !== undefined) parking.deadlineMs = deadline;
  if (max !== undefined) parking.maxDeadlineMs = max;
  return parking;
}
