// A worker's options: what a caller may set (TurnWorkerOptions; the environment sets a part of them,
// see config.ts), the defaults in one place, and the one step that checks them and fills the
// defaults in, giving the settings the worker and its jobs run with.
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { Tracer } from "@opentelemetry/api";
import type { EventObserver } from "../events/index.ts";
import { cooldownSettings, type CooldownSettings, type GatewayPolicy } from "../gateway/index.ts";
import { DEFAULT_PREFIX, type Logger } from "../kernel/index.ts";
import { parseDurability, type Durability, type RedisClient } from "../log/index.ts";
import { resolveClaudeBin } from "../runner/index.ts";
import {
  assertQueuePrefix,
  DEFAULT_QUEUE_NAME,
  DEFAULT_QUEUE_PREFIX,
  jobEnvPolicyFrom,
  withQueueEnvDefaults,
  type JobEnvPolicy,
} from "../queue/index.ts";
import type { CliMetricsSink, SecretValues, Scrubber, Telemetry } from "../telemetry/index.ts";
import { BUDGET_WINDOW_MS, SPEND_BUCKET_MS, type LedgerWindow, type TenantDefaults } from "../tenants/index.ts";
import { compileRunLimits, type RunLimitSettings } from "./limits.ts";
import { DEFAULT_RETRY, type RetryPolicy } from "./retry.ts";
import { DEFAULT_SNAPSHOT_CACHE_BYTES } from "./snapshots.ts";
import { DEFAULT_HEARTBEAT_MS } from "./registry.ts";
import { compileToolSandbox, type ToolSandboxOptions, type ToolSandboxSettings } from "./tool-sandbox.ts";

/** Whether a job may ask for its workspace's settings, hooks and MCP servers to load. */
export type WorkspaceTrust = "never" | "job";

export interface TurnWorkerOptions {
  /** Client for the log, the session order and leases (BullMQ gets a duplicate of it). */
  redis: RedisClient;
  /** Directories a turn's cwd must lie under. */
  workspaceRoots: readonly string[];
  /** CLIs run at a time (default 1). A job whose CLI has exited ends its turn beside the next job's CLI. */
  concurrency?: number;
  /** Event log key prefix (default TURNSTREAM_PREFIX, else "ts:"). */
  logPrefix?: string;
  /** BullMQ prefix: one hash tag (default TURNSTREAM_QUEUE_PREFIX, else "{turnstream}"). */
  queuePrefix?: string;
  /** The queue to take turns from (default TURNSTREAM_QUEUE_NAME, else "turns"). */
  queueName?: string;
  /** This worker's name in leases, attempts and logs (default: host and pid based). */
  workerId?: string;
  /** Config homes go under `<instanceRoot>/instances/<instanceId>/config-homes/<run>`. */
  instanceId?: string;
  /** Parent of the instances' folders (default `$XDG_DATA_HOME/turnstream`). */
  instanceRoot?: string;
  /** Allows `skipPermissions` turns as root (IS_SANDBOX=1); only where the worker runs in a sandbox. */
  sandboxed?: boolean;
  /** The `claude` binary to run (default: `CLAUDE_BIN`, else the pinned package's). */
  claudeBin?: string;
  /** Session lease TTL, renewed every third of it. Default 15 s. */
  leaseMs?: number;
  /** BullMQ job lock; a worker that dies loses its jobs after this. Default 30 s. */
  lockDuration?: number;
  /** How often BullMQ looks for jobs whose worker died (ms; BullMQ's default, 30 s). */
  stalledInterval?: number;
  /** How often a job may stall before it fails (default 5). */
  maxStalledCount?: number;
  /** Wait between SIGTERM and SIGKILL of a CLI tree (default 2000). */
  killGraceMs?: number;
  /** Backoff of retryable failures (rate limits, overload, server errors, timeouts); see DEFAULT_RETRY. */
  retry?: Partial<RetryPolicy>;
  /**
   * The env names and `PREFIX*` patterns a job's overlay may set (TURNSTREAM_JOB_ENV_ALLOW); default
   * DEFAULT_JOB_ENV_ALLOW. Names that load code, pick the binary or move the model traffic are refused
   * whatever this says (a few only by exact name: EXACT_OPT_IN_ENV_NAMES).
   */
  jobEnvAllow?: readonly string[];
  /** Names added to `jobEnvAllow` or to its default (TURNSTREAM_ALLOW_ENV). */
  allowEnv?: readonly string[];
  /**
   * `job`: a job's `trustWorkspace: true` is honoured. Default `never`: no workspace settings, hooks or MCP servers
   * load.
   */
  workspaceTrust?: WorkspaceTrust;
  /**
   * The tool sandbox of untrusted turns (see tool-sandbox.ts): `mode` on by default, the hosts tools
   * may reach (none by default), more paths they may not read.
   */
  toolSandbox?: ToolSandboxOptions;
  /** A vetted MCP config file: the only MCP servers a run with an untrusted workspace starts. */
  mcpConfigFile?: string;
  /**
   * The operators' public keys (`ed25519:…` lines; TURNSTREAM_OPERATOR_KEYS): only decisions and rules
   * signed by one of them count. Without any, supervised turns fail (nothing could be verified).
   */
  operatorKeys?: readonly string[];
  /** Parked turns: how supervised calls that wait for a person stop holding anything (ParkingOptions). */
  parking?: ParkingOptions;
  /**
   * Env every CLI run gets over its minimal base (TURNSTREAM_RUN_ENV names the worker's variables to
   * pass); the job's allowed overlay comes on top.
   */
  runEnv?: Record<string, string>;
  /** Where `{ fromEnv }` references in job env overlays are resolved; default process.env. */
  secretEnv?: Readonly<Record<string, string | undefined>>;
  /** Where the worker logs (pino-compatible; default silent). */
  logger?: Logger;
  /**
   * Scrubs logs, span texts, stderr, error messages and BullMQ job records (failed reason, stack,
   * return value, progress). The worker registers into it the secret-looking variables of
   * `secretEnv` and `runEnv`, the operator's credential file tokens, and every value a job resolves
   * through `{ fromEnv }`. Default: one over process.env.
   */
  scrubber?: Scrubber;
  /** Extra known secret values (name → value), redacted everywhere including raw `cli.line` text. */
  secretValues?: SecretValues;
  /**
   * Keep `cli.line` raw text, `turn.finished.resultText` and session snapshots (the CLI's session
   * file) exactly as the CLI wrote them. Default false: known secret values and secret shapes
   * (tokens, keys, passwords in URLs: the built-in patterns, which keep a JSON line valid) are
   * replaced before anything is appended, and a resumed session shows the model the markers. Tool
   * output is workspace and attacker input, so keep it raw only where the log is as trusted as the secrets.
   * `TURNSTREAM_KEEP_RAW_LINES=1` for worker processes.
   */
  keepRawLines?: boolean;
  /**
   * A CLI run that prints more lines than this (stdout and stderr together) is ended, its process
   * tree killed, and its turn fails with errorKind `output_limit`. Default 100,000: a long agentic
   * turn prints a few thousand. A job cannot raise it.
   */
  maxOutputLines?: number;
  /** Likewise for bytes of output. Default 256 MiB. */
  maxOutputBytes?: number;
  /**
   * Each run's maximum processes, memory, CPU, scratch and turn duration (DEFAULT_RUN_LIMITS; 0 turns
   * one off). A job may ask for less (`options.limits`, `options.timeoutMs`), never more.
   * `TURNSTREAM_MAX_PIDS`, `TURNSTREAM_MAX_MEMORY_MB`, `TURNSTREAM_MAX_CPUS`, `TURNSTREAM_MAX_SCRATCH_MB`,
   * `TURNSTREAM_MAX_TURN_MS`.
   */
  limits?: Partial<RunLimitSettings>;
  /** Spans of every attempt go through this (flushed, bounded, on close; its owner shuts it down). */
  telemetry?: Telemetry;
  /** Tracer for attempt spans; overrides `telemetry`'s (tests: a provider with an in-memory exporter). */
  tracer?: Tracer;
  /**
   * See every event the worker appends, attempt by attempt, in log order (metrics, tests). They come
   * after the worker's own span observer; what one throws is logged and the turn goes on.
   */
  observers?: readonly EventObserver[];
  /**
   * When an append counts as done (default TURNSTREAM_DURABILITY): `memory` (default), `replicas:N` (WAIT N
   * after each batch) or `fsync` (the primary's AOF on disk). The worker's log, its decision hub and the
   * turn's terminal event are acknowledged at this level.
   */
  durability?: string | undefined;
  /** Told each event-log append's duration in seconds (the log-append metric). */
  onLogAppend?: ((seconds: number) => void) | undefined;
  /**
   * Where the CLIs' own metrics go (WorkerInstruments.cliMetrics): with it, and TURNSTREAM_CLI_TELEMETRY
   * on, each CLI exports its metrics to the worker's receiver and they become the worker's instruments;
   * without it the CLIs are not asked for metrics.
   */
  cliMetrics?: CliMetricsSink | undefined;
  /** Default true: start fetching jobs at once. */
  autorun?: boolean;
  /**
   * Bytes of session files kept in memory for the sessions this worker ran last, so their next turn
   * here skips rebuilding the file from the log. Default 64 MiB; 0 turns it off.
   */
  snapshotCacheBytes?: number;
  /**
   * How often the worker writes its entry in the worker registry (`turnstream status` lists it);
   * the entry expires after three missed beats. Default 5000 ms.
   */
  heartbeatMs?: number;
  /** Warm sessions: which turns keep their CLI process up for the session's next turn, and the pool's bounds. */
  warm?: WarmOptions;
  /**
   * `broker` (default): runs reach the model through the worker's loopback gateway with a token of
   * their own and never hold the worker's credential. `passthrough`: each run holds the credential,
   * as before (the only way to run Bedrock, Vertex or Foundry). `TURNSTREAM_GATEWAY`.
   */
  gateway?: GatewayMode;
  /**
   * What the gateway asks before each model request leaves the worker, after the tenants' budgets
   * (default: allow all). The fleet cooldown, when on, is asked last.
   */
  gatewayPolicy?: GatewayPolicy;
  /**
   * The fleet-wide cooldown of a credential the model API answered 429, 529 or 503 (see
   * src/gateway/cooldown.ts): on by default; `false` turns it off (`TURNSTREAM_GATEWAY_COOLDOWN=off`).
   * `maxHoldMs` (default 60 s; `TURNSTREAM_GATEWAY_COOLDOWN_HOLD`) bounds how long a request is held
   * before the gateway answers 429 itself; `baseBackoffMs` (1 s) and `maxBackoffMs` (60 s) shape a
   * cooldown whose answer named no retry-after.
   */
  cooldown?: false | Partial<CooldownSettings>;
  /** Tenants' limits: the defaults of a tenant with none set, and the budget's window (TenantOptions). */
  tenants?: TenantOptions;
  /**
   * The CLI's own spans, joined into the attempt's trace while the worker traces (`telemetry`), and
   * its metrics while the worker keeps metrics (`cliMetrics`): on by default; `enabled: false` keeps
   * the CLI's telemetry off (`TURNSTREAM_CLI_TELEMETRY=off`). `content: true` keeps the prompt and
   * tool texts the CLI records, scrubbed (`TURNSTREAM_CLI_TELEMETRY_CONTENT=1`); by default they are
   * dropped.
   */
  cliTelemetry?: CliTelemetryOptions;
}

export interface CliTelemetryOptions {
  enabled?: boolean;
  content?: boolean;
}

/**
 * How the worker holds tenants to their limits. A tenant's own limits (`turnstream tenants set`,
 * signed by an operator key) replace the defaults.
 */
export interface TenantOptions {
  /**
   * Limits of a tenant with none of its own. Default: no budget, no running limit, `wait` when over
   * budget. `TURNSTREAM_TENANT_BUDGET_USD`, `TURNSTREAM_TENANT_MAX_RUNNING`, `TURNSTREAM_TENANT_OVER_BUDGET`.
   */
  defaults?: Partial<TenantDefaults>;
  /** The budget's rolling window. Default 24 h. */
  budgetWindowMs?: number;
  /** Spend is kept in buckets this long; the oldest one counts whole until it leaves the window. Default 5 min. */
  spendBucketMs?: number;
  /**
   * Run only turns that name a tenant with signed limits (a signed clear counts); others fail
   * `tenant_limits`. Without it a turn that names no tenant runs unlimited, and one that names a new
   * tenant gets the defaults, fresh for every new name. `TURNSTREAM_TENANTS_SIGNED_ONLY=1`. Default off.
   */
  signedOnly?: boolean;
}

export interface TenantSettings {
  defaults: TenantDefaults;
  window: LedgerWindow;
  signedOnly: boolean;
}

function compileTenants(options: TenantOptions | undefined): TenantSettings {
  const defaults = options?.defaults ?? {};
  if (defaults.budgetUsd !== undefined && !(Number.isFinite(defaults.budgetUsd) && defaults.budgetUsd > 0))
    throw new RangeError(`tenants.defaults.budgetUsd must be a positive number of USD, got ${defaults.budgetUsd}`);
  const maxRunning =
    defaults.maxRunning === undefined
      ? undefined
      : positiveLimit("tenants.defaults.maxRunning", defaults.maxRunning, 1);
  const window = {
    windowMs: positiveLimit("tenants.budgetWindowMs", options?.budgetWindowMs, BUDGET_WINDOW_MS),
    bucketMs: positiveLimit("tenants.spendBucketMs", options?.spendBucketMs, SPEND_BUCKET_MS),
  };
  if (window.bucketMs > window.windowMs)
    throw new RangeError("tenants.spendBucketMs must not be longer than tenants.budgetWindowMs");
  return {
    defaults: { budgetUsd: defaults.budgetUsd, maxRunning, overBudget: defaults.overBudget ?? "wait" },
    window,
    signedOnly: options?.signedOnly === true,
  };
}

/**
 * A worker's warm sessions (see README "Warm sessions"): after a turn the CLI process stays up and answers the
 * session's next turn here.
 */
export interface WarmOptions {
  /** Every turn runs warm, not only those enqueued with `options.warm: true`. Default false. `TURNSTREAM_WARM=1`. */
  all?: boolean;
  /** An idle warm process is ended after this long (default 5 min). */
  idleTtlMs?: number;
  /** Most idle warm processes per worker, least recently used ended first (default 8). */
  maxProcesses?: number;
  /** Most resident memory of all idle warm trees together (default 2 GiB). */
  maxRssBytes?: number;
}

/** How a run reaches the model: through the worker's gateway (`broker`) or holding the credential (`passthrough`). */
export type GatewayMode = "broker" | "passthrough";

/** The options a worker process reads from its environment (workerConfigFromEnv). */
export type WorkerEnvConfig = Pick<
  TurnWorkerOptions,
  | "workspaceRoots"
  | "concurrency"
  | "instanceId"
  | "instanceRoot"
  | "sandboxed"
  | "logPrefix"
  | "durability"
  | "queuePrefix"
  | "queueName"
  | "claudeBin"
  | "jobEnvAllow"
  | "allowEnv"
  | "runEnv"
  | "workspaceTrust"
  | "toolSandbox"
  | "mcpConfigFile"
  | "operatorKeys"
  | "parking"
  | "tenants"
  | "keepRawLines"
  | "limits"
  | "warm"
  | "gateway"
  | "cooldown"
  | "cliTelemetry"
>;

/** The settings a worker and its jobs run with: every option checked, every default filled in. */
export interface WorkerSettings {
  workerId: string;
  workspaceRoots: readonly string[];
  concurrency: number;
  logPrefix: string;
  queuePrefix: string;
  queueName: string;
  leaseMs: number;
  lockDuration: number;
  stalledInterval: number;
  maxStalledCount: number;
  autorun: boolean;
  instanceId: string;
  instanceRoot: string | undefined;
  sandboxed: boolean;
  durability: Durability;
  /** The `claude` binary, resolved once at start from the worker's own options and environment. */
  claudeBin: string;
  killGraceMs: number;
  /** Env laid over every run (under the job's own overlay). */
  runEnv: Record<string, string>;
  /** The worker's environment as it started: where a run's model access and CLI settings come from. */
  hostEnv: Readonly<Record<string, string | undefined>>;
  /** Where `{ fromEnv }` references are resolved. */
  secretEnv: Readonly<Record<string, string | undefined>>;
  /** What a job's env overlay may set. */
  jobEnv: JobEnvPolicy;
  workspaceTrust: WorkspaceTrust;
  toolSandbox: ToolSandboxSettings;
  mcpConfigFile: string | undefined;
  operatorKeys: readonly string[] | undefined;
  parking: ParkingSettings;
  tenants: TenantSettings;
  retry: RetryPolicy;
  /** A head turn whose job vanished is dropped after this long (its producer died mid-enqueue). */
  orphanMs: number;
  /** A run that prints more lines than this (stdout and stderr together) is ended; its turn fails `output_limit`. */
  maxOutputLines: number;
  /** Likewise for bytes of output. */
  maxOutputBytes: number;
  /** Each run's maximums (processes, memory, CPU, scratch, turn duration); a job may only lower them. */
  limits: RunLimitSettings;
  keepRawLines: boolean;
  /** 0: no snapshot cache. */
  snapshotCacheBytes: number;
  heartbeatMs: number;
  /** Warm sessions: `all` turns unless a turn opts in (`enabled` false means only turns with `options.warm`). */
  warm: WarmSettings;
  gateway: GatewayMode;
  /** The fleet cooldown's settings; undefined: off. */
  cooldown: CooldownSettings | undefined;
  cliTelemetry: Required<CliTelemetryOptions>;
}

/** How a worker keeps CLI processes between a session's turns. */
export interface WarmSettings {
  /** Every turn runs warm, not only those that ask. */
  all: boolean;
  idleTtlMs: number;
  maxProcesses: number;
  maxRssBytes: number;
  /** How long after a warm turn other workers hand the session's next job back for the owner to take. */
  handoffMs: number;
}

export const WORKER_DEFAULTS = {
  concurrency: 1,
  logPrefix: DEFAULT_PREFIX,
  queuePrefix: DEFAULT_QUEUE_PREFIX,
  queueName: DEFAULT_QUEUE_NAME,
  leaseMs: 15_000,
  lockDuration: 30_000,
  // BullMQ's own default, stated because BullMQ takes an explicit undefined over its defaults.
  stalledInterval: 30_000,
  maxStalledCount: 5,
  autorun: true,
  sandboxed: false,
  killGraceMs: 2000,
  workspaceTrust: "never",
  orphanMs: 30_000,
  // Long agentic turns print a few thousand lines and a few MB (a line per content block and per
  // tool result, about 1 KB each); these leave room for far longer ones and still bound what one
  // turn can put into Redis.
  maxOutputLines: 100_000,
  maxOutputBytes: 256 * 1024 * 1024,
  keepRawLines: false,
  snapshotCacheBytes: DEFAULT_SNAPSHOT_CACHE_BYTES,
  heartbeatMs: DEFAULT_HEARTBEAT_MS,
  warm: {
    all: false,
    idleTtlMs: 5 * 60_000,
    maxProcesses: 8,
    maxRssBytes: 2 * 1024 * 1024 * 1024,
    // Long enough for a client that enqueues the next turn as soon as it sees turn.finished, short
    // enough that a dead owner delays the session's next turn by little.
    handoffMs: 3000,
  },
} as const satisfies Partial<WorkerSettings>;

/**
 * A supervised call that no trust rule decides at once and no operator answers within the answer
 * window parks: the CLI ends its run, the turn waits holding no process, slot, lease or job lock, and
 * any worker resumes it once the request is decided, or denies it at its deadline.
 */
export interface ParkingOptions {
  /** False: calls wait in the running CLI for the hub's timeout (300 s), as before parking. Default true. */
  enabled?: boolean;
  /** How long a call waits for an operator before its turn parks. Default 5 s. `TURNSTREAM_ANSWER_WINDOW`. */
  answerWindowMs?: number;
  /** A parked request's deadline when its job names none. Default 8 h. `TURNSTREAM_DECISION_DEADLINE`. */
  deadlineMs?: number;
  /** The longest deadline a job may ask for. Default 7 d. `TURNSTREAM_DECISION_DEADLINE_MAX`. */
  maxDeadlineMs?: number;
  /** How often the worker looks for decided parked turns whose wake-up was lost. Default 15 s. */
  sweepMs?: number;
}

export type ParkingSettings = Required<ParkingOptions>;

export const PARKING_DEFAULTS: ParkingSettings = {
  enabled: true,
  answerWindowMs: 5000,
  deadlineMs: 8 * 3_600_000,
  maxDeadlineMs: 7 * 86_400_000,
  sweepMs: 15_000,
};

function compileParking(options: ParkingOptions | undefined): ParkingSettings {
  const parking = { ...PARKING_DEFAULTS, ...options };
  if (!Number.isSafeInteger(parking.answerWindowMs) || parking.answerWindowMs < 0)
    throw new RangeError(`parking.answerWindowMs must be 0 or more milliseconds, got ${parking.answerWindowMs}`);
  positiveLimit("parking.deadlineMs", parking.deadlineMs, 1);
  positiveLimit("parking.maxDeadlineMs", parking.maxDeadlineMs, 1);
  positiveLimit("parking.sweepMs", parking.sweepMs, 1);
  if (parking.deadlineMs > parking.maxDeadlineMs)
    throw new RangeError(
      `parking.deadlineMs (${parking.deadlineMs} ms) is longer than parking.maxDeadlineMs (${parking.maxDeadlineMs} ms); raise the maximum or shorten the default`,
    );
  return parking;
}

function positiveLimit(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new RangeError(`${name} must be a positive integer, got ${String(value)}`);
  return value;
}

const defaultWorkerId = (): string =>
  `w-${hostname()
    .replace(/[^A-Za-z0-9]/g, "")
    .slice(0, 20)}-${process.pid}-${randomBytes(3).toString("hex")}`;

/**
 * Checks a worker's options and fills in the defaults: the settings it runs with. Where the log and the
 * queue are, left out, is what the environment says (TURNSTREAM_PREFIX and the rest), as for the producer.
 */
export function compileWorkerOptions(given: Omit<TurnWorkerOptions, "redis">): WorkerSettings {
  const options = withQueueEnvDefaults(given);
  const defaults = WORKER_DEFAULTS;
  const queuePrefix = options.queuePrefix ?? defaults.queuePrefix;
  assertQueuePrefix(queuePrefix);
  if (options.workspaceRoots.length === 0)
    throw new Error("workspaceRoots must list at least one directory (TURNSTREAM_WORKSPACE_ROOTS)");
  const workerId = options.workerId ?? defaultWorkerId();
  return {
    workerId,
    workspaceRoots: [...options.workspaceRoots],
    concurrency: options.concurrency ?? defaults.concurrency,
    logPrefix: options.logPrefix ?? defaults.logPrefix,
    queuePrefix,
    queueName: options.queueName ?? defaults.queueName,
    leaseMs: options.leaseMs ?? defaults.leaseMs,
    lockDuration: options.lockDuration ?? defaults.lockDuration,
    stalledInterval: options.stalledInterval ?? defaults.stalledInterval,
    maxStalledCount: options.maxStalledCount ?? defaults.maxStalledCount,
    autorun: options.autorun ?? defaults.autorun,
    instanceId: options.instanceId ?? workerId.replace(/[^A-Za-z0-9._-]/g, "-"),
    instanceRoot: options.instanceRoot,
    sandboxed: options.sandboxed ?? defaults.sandboxed,
    durability: parseDurability(options.durability, "durability (TURNSTREAM_DURABILITY)"),
    claudeBin: resolveClaudeBin({ claudeBin: options.claudeBin }),
    killGraceMs: options.killGraceMs ?? defaults.killGraceMs,
    runEnv: options.runEnv ?? {},
    hostEnv: { ...process.env },
    secretEnv: options.secretEnv ?? process.env,
    jobEnv: jobEnvPolicyFrom(options),
    workspaceTrust: options.workspaceTrust ?? defaults.workspaceTrust,
    toolSandbox: compileToolSandbox(options.toolSandbox, {
      instanceRoot: options.instanceRoot,
      workspaceRoots: options.workspaceRoots,
      runPath: options.runEnv?.["PATH"] ?? process.env["PATH"],
    }),
    mcpConfigFile: options.mcpConfigFile,
    operatorKeys: options.operatorKeys,
    parking: compileParking(options.parking),
    tenants: compileTenants(options.tenants),
    retry: { ...DEFAULT_RETRY, ...options.retry },
    orphanMs: defaults.orphanMs,
    maxOutputLines: positiveLimit("maxOutputLines", options.maxOutputLines, defaults.maxOutputLines),
    maxOutputBytes: positiveLimit("maxOutputBytes", options.maxOutputBytes, defaults.maxOutputBytes),
    limits: compileRunLimits(options.limits),
    keepRawLines: options.keepRawLines ?? defaults.keepRawLines,
    snapshotCacheBytes: options.snapshotCacheBytes ?? defaults.snapshotCacheBytes,
    heartbeatMs: positiveLimit("heartbeatMs", options.heartbeatMs, defaults.heartbeatMs),
    gateway: options.gateway ?? "broker",
    cooldown: options.cooldown === false ? undefined : cooldownSettings(options.cooldown ?? {}),
    cliTelemetry: {
      enabled: options.cliTelemetry?.enabled ?? true,
      content: options.cliTelemetry?.content ?? false,
    },
    warm: {
      all: options.warm?.all ?? defaults.warm.all,
      idleTtlMs: positiveLimit("warm.idleTtlMs", options.warm?.idleTtlMs, defaults.warm.idleTtlMs),
      maxProcesses: positiveLimit("warm.maxProcesses", options.warm?.maxProcesses, defaults.warm.maxProcesses),
      maxRssBytes: positiveLimit("warm.maxRssBytes", options.warm?.maxRssBytes, defaults.warm.maxRssBytes),
      handoffMs: defaults.warm.handoffMs,
    },
  };
}
