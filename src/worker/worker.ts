// The turn worker: a BullMQ worker whose processor is executeTurnJob, plus what a process needs
// around it: lock-loss handling, bounded shutdown (stop taking jobs, let running turns finish within
// a grace period, then end them and record their attempts abandoned), and connection cleanup.
import { hostname } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Worker, type Job } from "bullmq";
import { DEFAULT_PREFIX, silentLogger, type Logger } from "../kernel/index.ts";
import { createEventLog, type RedisClient } from "../log/index.ts";
import { assertQueuePrefix, bullConnection, checkAllowEnv, createTurnQueue, DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX, SessionOrder } from "../queue/index.ts";
import type { Tracer } from "@opentelemetry/api";
import { CREDENTIALS_FILE, operatorConfigDir } from "../cli/index.ts";
import { createScrubber, scrubError, type SecretValues, type Scrubber, type Telemetry } from "../telemetry/index.ts";
import { startDecisionHub, sweepSupervisedDirs, type DecisionHub } from "../decisions/index.ts";
import { executeTurnJob, type EventObserver, type ExecuteSettings, type RunningTurn, type TurnJobResult, type WorkspaceTrust } from "./execute.ts";
import { DEFAULT_RETRY, type RetryPolicy } from "./retry.ts";
import { SnapshotCache } from "./snapshots.ts";
import { CliSlots } from "./cli-slots.ts";

export interface TurnWorkerOptions {
  /** Client for the log, the session order and leases (BullMQ gets a duplicate of it). */
  redis: RedisClient;
  /** Directories a turn's cwd must lie under. */
  workspaceRoots: readonly string[];
  /** CLIs run at a time (default 1). A job whose CLI has exited ends its turn beside the next job's CLI. */
  concurrency?: number;
  /** Event log key prefix (default "ts:"). */
  logPrefix?: string;
  /** BullMQ prefix: one hash tag (default "{turnstream}"). */
  queuePrefix?: string;
  /** The queue to take turns from (default "turns"). */
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
  /** How often BullMQ looks for jobs whose worker died (ms; BullMQ's default). */
  stalledInterval?: number;
  /** How often a job may stall before it fails (BullMQ's default). */
  maxStalledCount?: number;
  /** Wait between SIGTERM and SIGKILL of a CLI tree (default 2000). */
  killGraceMs?: number;
  /** Backoff of retryable failures (rate limits, overload, server errors, timeouts); see DEFAULT_RETRY. */
  retry?: Partial<RetryPolicy>;
  /**
   * Env names a job's overlay may set although refused by default (PATH, ANTHROPIC_BASE_URL, proxies:
   * ALLOWABLE_ENV_NAMES). Everything else that reaches the CLI's gates is refused whatever this says.
   */
  allowEnv?: readonly string[];
  /** `job`: a job's `trustWorkspace: true` is honoured. Default `never`: no workspace settings, hooks or MCP servers load. */
  workspaceTrust?: WorkspaceTrust;
  /** A vetted MCP config file: the only MCP servers a run with an untrusted workspace starts. */
  mcpConfigFile?: string;
  /**
   * The operators' public keys (`ed25519:…` lines; TURNSTREAM_OPERATOR_KEYS): only decisions and rules
   * signed by one of them count. Without any, supervised turns fail (nothing could be verified).
   */
  operatorKeys?: readonly string[];
  /** Env laid over every CLI run (the job's overlay comes on top). */
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
   * turn prints a few thousand. A job cannot raise it. `TURNSTREAM_MAX_OUTPUT_LINES`.
   */
  maxOutputLines?: number;
  /** Likewise for bytes of output. Default 256 MiB. `TURNSTREAM_MAX_OUTPUT_MB`. */
  maxOutputBytes?: number;
  /** Spans of every attempt go through this (flushed, bounded, on close; its owner shuts it down). */
  telemetry?: Telemetry;
  /** Tracer for attempt spans; overrides `telemetry`'s (tests: a provider with an in-memory exporter). */
  tracer?: Tracer;
  /** Sees every event the worker appends (tests, metrics). */
  observer?: EventObserver;
  /** Default true: start fetching jobs at once. */
  autorun?: boolean;
  /**
   * Bytes of session files kept in memory for the sessions this worker ran last, so their next turn
   * here skips rebuilding the file from the log. Default 64 MiB; 0 turns it off.
   */
  snapshotCacheBytes?: number;
}

export interface TurnWorker {
  readonly id: string;
  readonly worker: Worker;
  /** Turns running now. */
  readonly active: number;
  /** Resolves once the worker's connections are ready. */
  ready(): Promise<void>;
  /**
   * Stops taking jobs, waits up to `graceMs` (default 30 s) for running turns, then ends the rest
   * (their trees are killed, their attempts recorded abandoned, their jobs handed back), and closes.
   * Bounded by about graceMs + killGraceMs + closeTimeoutMs even when Redis is unreachable.
   */
  close(options?: { graceMs?: number; closeTimeoutMs?: number }): Promise<void>;
}


// Long agentic turns print a few thousand lines and a few MB (a line per content block and per tool
// result, about 1 KB each); these leave room for far longer ones and still bound what one turn can
// put into Redis.
const DEFAULT_MAX_OUTPUT_LINES = 100_000;
const DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024 * 1024;

function positiveLimit(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer, got ${String(value)}`);
  return value;
}

function boundedWait(p: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    p.then(
      () => {
        clearTimeout(t);
        resolve(true);
      },
      () => {
        clearTimeout(t);
        resolve(true);
      },
    );
  });
}

/** Starts a turn worker on the queue: each job leases its session, runs the CLI, appends every line to the log, snapshots the session and ends the turn. */
export function startTurnWorker(options: TurnWorkerOptions): TurnWorker {
  const logger = options.logger ?? silentLogger;
  const logPrefix = options.logPrefix ?? DEFAULT_PREFIX;
  const queuePrefix = options.queuePrefix ?? DEFAULT_QUEUE_PREFIX;
  assertQueuePrefix(queuePrefix);
  if (options.workspaceRoots.length === 0) throw new Error("workspaceRoots must list at least one directory (TURNSTREAM_WORKSPACE_ROOTS)");
  const allowEnv = checkAllowEnv(options.allowEnv ?? []);
  const id = options.workerId ?? `w-${hostname().replace(/[^A-Za-z0-9]/g, "").slice(0, 20)}-${process.pid}-${randomBytes(3).toString("hex")}`;
  const leaseMs = options.leaseMs ?? 15_000;
  const lockDuration = options.lockDuration ?? 30_000;
  const killGraceMs = options.killGraceMs ?? 2000;
  const log = createEventLog({ redis: options.redis, prefix: logPrefix, logger });
  const queue = createTurnQueue({ redis: options.redis, queuePrefix, queueName: options.queueName ?? DEFAULT_QUEUE_NAME });
  const order = new SessionOrder({ redis: options.redis, logPrefix, queue });
  const settings: ExecuteSettings = {
    workerId: id,
    workspaceRoots: [...options.workspaceRoots],
    leaseMs,
    instanceId: options.instanceId ?? id.replace(/[^A-Za-z0-9._-]/g, "-"),
    instanceRoot: options.instanceRoot,
    sandboxed: options.sandboxed ?? false,
    claudeBin: options.claudeBin,
    killGraceMs,
    runEnv: options.runEnv ?? {},
    secretEnv: options.secretEnv ?? process.env,
    allowEnv,
    workspaceTrust: options.workspaceTrust ?? "never",
    mcpConfigFile: options.mcpConfigFile,
    retry: { ...DEFAULT_RETRY, ...options.retry },
    orphanMs: 30_000,
    maxOutputLines: positiveLimit("maxOutputLines", options.maxOutputLines, DEFAULT_MAX_OUTPUT_LINES),
    maxOutputBytes: positiveLimit("maxOutputBytes", options.maxOutputBytes, DEFAULT_MAX_OUTPUT_BYTES),
  };
  const running = new Map<string, RunningTurn>();
  const scrubber = options.scrubber ?? createScrubber({ env: process.env });
  // Raw CLI lines: known values and the built-in patterns, which keep a JSON line valid; not the
  // caller's scrubber, whose hook or extra patterns might not.
  const lineScrubber = createScrubber({ env: process.env });
  const known = (s: Scrubber): void => {
    s.addEnv(settings.secretEnv).addEnv(settings.runEnv);
    if (options.secretValues !== undefined) s.addValues(options.secretValues);
    try {
      s.addCredentialFile(join(operatorConfigDir({ ...process.env, ...settings.secretEnv }), CREDENTIALS_FILE));
    } catch (err) {
      logger.warn({ err: { message: (err as Error).message } }, "could not read the operator's credential file for scrubbing");
    }
  };
  known(scrubber);
  known(lineScrubber);
  const tracer = options.tracer ?? (options.telemetry?.enabled === true ? options.telemetry.tracer : undefined);
  // Started on the first supervised turn: most workers never need the loopback hub. Its start also
  // removes the run folders (tokens, hook settings) that SIGKILLed workers' hubs left behind.
  let hub: Promise<DecisionHub> | undefined;
  const decisionHub = (): Promise<DecisionHub> => {
    if (hub === undefined) sweepSupervisedDirs({ logger });
    return (hub ??= startDecisionHub({ log, redis: options.redis, prefix: logPrefix, logger, scrubber, ...(options.operatorKeys !== undefined ? { operatorKeys: options.operatorKeys } : {}) }));
  };
  const deps = {
    log,
    order,
    settings,
    logger,
    scrubber,
    lineScrubber,
    keepRawLines: options.keepRawLines ?? false,
    ...(tracer !== undefined ? { tracer } : {}),
    observer: options.observer ?? {},
    running,
    decisionHub,
    ...(options.snapshotCacheBytes !== 0 ? { snapshots: new SnapshotCache(options.snapshotCacheBytes) } : {}),
  };
  const connection = bullConnection(options.redis);
  // What BullMQ stores (return value, failed reason, stack trace, progress) passes the scrubber.
  const processor = async (job: Job, token: string | undefined, signal?: AbortSignal): Promise<TurnJobResult> => {
    const updateProgress = job.updateProgress.bind(job);
    job.updateProgress = (progress) => updateProgress(scrubber.scrubDeep(progress, { sink: "job" }));
    const slot = slots?.hold();
    try {
      return scrubber.scrubDeep(await executeTurnJob(deps, job, token, signal, slot), { sink: "job" });
    } catch (err) {
      throw scrubError(err, scrubber);
    } finally {
      slot?.done();
    }
  };
  const concurrency = options.concurrency ?? 1;
  let slots: CliSlots | undefined;
  const worker = new Worker(queue.name, processor, {
    connection: connection as never,
    prefix: queuePrefix,
    concurrency,
    lockDuration,
    ...(options.stalledInterval !== undefined ? { stalledInterval: options.stalledInterval } : {}),
    maxStalledCount: options.maxStalledCount ?? 5,
    autorun: options.autorun ?? true,
  });
  slots = new CliSlots(worker, concurrency);
  worker.on("lockRenewalFailed", (jobIds: string[]) => {
    for (const j of jobIds) running.get(j)?.stop("lock_lost");
  });
  worker.on("error", (err) => logger.warn({ worker: id, err: { name: err.name, message: err.message } }, "queue worker error"));
  worker.on("failed", (job, err) => {
    if (job !== undefined) logger.info({ worker: id, jobId: job.id, err: { message: err.message } }, "turn job failed");
  });

  let closing: Promise<void> | undefined;
  async function close(opts: { graceMs?: number; closeTimeoutMs?: number } = {}): Promise<void> {
    if (closing !== undefined) return closing;
    closing = (async () => {
      const graceMs = opts.graceMs ?? 30_000;
      const closeTimeoutMs = opts.closeTimeoutMs ?? 5000;
      logger.info({ worker: id, running: running.size, graceMs }, "worker shutting down");
      // A job that has not started its CLI yet hands its turn back now instead of starting one.
      slots?.close();
      // Not force: BullMQ stops fetching and waits for the processors, which we end below.
      const closed = worker.close();
      closed.catch(() => undefined);
      // With nothing running there is nothing to wait for but BullMQ itself (which hangs while Redis
      // is unreachable), so an idle worker does not spend its grace period.
      const idle = running.size === 0;
      if (!(await boundedWait(closed, idle ? Math.min(graceMs, closeTimeoutMs) : graceMs))) {
        for (const r of running.values()) r.stop("shutdown");
        if (idle || !(await boundedWait(closed, killGraceMs + closeTimeoutMs))) {
          logger.warn({ worker: id }, "worker did not close in time; forcing");
          if (!(await boundedWait(worker.close(true), 1000))) {
            // BullMQ's own connections retry forever and their timers would keep the process alive.
            void worker.disconnect().catch(() => undefined);
          }
        }
      }
      if (options.telemetry !== undefined) await boundedWait(options.telemetry.forceFlush(), closeTimeoutMs);
      if (!(await boundedWait(queue.close(), closeTimeoutMs))) void queue.disconnect().catch(() => undefined);
      if (hub !== undefined) await boundedWait(hub.then((h) => h.close()), closeTimeoutMs);
      for (const c of [connection, queue.opts.connection as RedisClient]) {
        if (!(await boundedWait(c.quit(), 1000))) c.disconnect();
      }
    })();
    return closing;
  }

  return {
    id,
    worker,
    get active() {
      return running.size;
    },
    ready: () => worker.waitUntilReady().then(() => undefined),
    close,
  };
}
