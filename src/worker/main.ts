// A worker process: configuration from the environment, the scrubbing logger, SIGTERM/SIGINT → a
// bounded shutdown. Used by workers/turn-worker.ts and `turnstream worker`.
import {
  checkDurability,
  connectRedis,
  explainRedisError,
  parseDurability,
  redisAddress,
  type RedisClient,
} from "../log/index.ts";
import {
  createLogger,
  createScrubber,
  routeConsoleToLogger,
  startTelemetry,
  warnRemovedEnvVars,
  type Scrubber,
  type Telemetry,
} from "../telemetry/index.ts";
import { workerConfigFromEnv } from "./config.ts";
import { DEFAULT_SWEEP_INTERVAL_MS, startHousekeeping, type Housekeeping } from "./housekeeping.ts";
import { startWorkerObservability, type WorkerObservability } from "./observability.ts";
import { DEFAULT_PREFIX, errorReporter, type Logger } from "../kernel/index.ts";
import { DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX } from "../queue/index.ts";
import { boundedWait, startTurnWorker, type TurnWorker } from "./worker.ts";
import type { TurnWorkerOptions } from "./options.ts";

export interface WorkerMainOptions {
  env?: Readonly<Record<string, string | undefined>>;
  /** Overrides TURNSTREAM_CONCURRENCY. */
  concurrency?: number | undefined;
  /** Shutdown grace period (default TURNSTREAM_SHUTDOWN_GRACE_MS or 30 s). */
  graceMs?: number | undefined;
  /** `--ops-port`: overrides TURNSTREAM_OPS_PORT (the /metrics, /healthz, /readyz endpoint). */
  opsPort?: string | undefined;
  /** The library's options (tuning no variable sets), laid over the environment's. */
  workerOptions?: Partial<Omit<TurnWorkerOptions, "redis">>;
}

/** What runs in the process beside its turn worker, stopped once the worker has closed. */
interface ProcessParts {
  env: Readonly<Record<string, string | undefined>>;
  /** The environment's settings, where the log and the queue are filled in. */
  cfg: ReturnType<typeof workerConfigFromEnv> & { logPrefix: string; queuePrefix: string; queueName: string };
  logger: Logger;
  scrubber: Scrubber;
  housekeeping: Housekeeping;
  telemetry: Telemetry;
  redis: RedisClient;
  obs: WorkerObservability;
}

/** Starts the worker and resolves with the exit code once a signal has shut it down. */
export async function runWorkerMain(options: WorkerMainOptions = {}): Promise<number> {
  const parts = await startProcessParts(options);
  const { logger } = parts;
  const worker = await startWorkerIn(parts, options);
  const graceMs = options.graceMs ?? shutdownGraceMs(parts.env);
  if (parts.cfg.operatorKeys === undefined)
    logger.warn(
      {},
      "no TURNSTREAM_OPERATOR_KEYS: supervised turns will fail, since no operator decision could be verified",
    );
  await worker.ready();
  // Listening for the stop signal comes before saying "ready": a supervisor that stops the worker as
  // soon as it reads that line must get a clean stop, not the default action of an unheld SIGTERM.
  const stopSignal = untilSignal(parts);
  markReady(parts, worker);
  await stopSignal;
  await worker.close({ graceMs });
  await stopProcessParts(parts);
  logger.info({ worker: worker.id }, "worker stopped");
  return 0;
}

/**
 * The worker's settings from its environment, with where the log and the queue are filled in: from
 * that environment, never from the process's own when the caller gave another (runWorkerMain's `env`).
 */
function settingsFromEnv(env: Readonly<Record<string, string | undefined>>): ProcessParts["cfg"] {
  const cfg = workerConfigFromEnv(env);
  return {
    ...cfg,
    logPrefix: cfg.logPrefix ?? DEFAULT_PREFIX,
    queuePrefix: cfg.queuePrefix ?? DEFAULT_QUEUE_PREFIX,
    queueName: cfg.queueName ?? DEFAULT_QUEUE_NAME,
    durability: cfg.durability ?? "memory",
  };
}

/** The logger, instance id, telemetry, Redis connection and observability, in the order each needs the last. */
async function startProcessParts(options: WorkerMainOptions): Promise<ProcessParts> {
  const env = options.env ?? process.env;
  const cfg = settingsFromEnv(env);
  const scrubber = createScrubber({ env: env as Record<string, string | undefined> });
  const logger = createLogger({ scrubber, base: { service: "turn-worker" }, env });
  // What libraries print to the console (BullMQ, ioredis) goes through the logger too, for the rest
  // of the process's life: its stdout holds only JSON lines.
  routeConsoleToLogger(logger);
  warnRemovedEnvVars(env, logger);
  // The instance id is held from here until the worker stops; the first sweep runs before any turn.
  const housekeeping = await startHousekeeping({
    ...cfg,
    sweepIntervalMs: DEFAULT_SWEEP_INTERVAL_MS,
    logger,
    env,
  });
  // Off unless OTEL_* configures an exporter; spans pass the redacting exporter either way.
  const telemetry = startTelemetry({ scrubber, env });
  const redis = connectRedis({ env: env as NodeJS.ProcessEnv });
  const reportError = errorReporter(logger);
  redis.on("error", (err: Error) => reportError("redis connection error", explainRedisError(err, redisAddress(redis))));
  // Metrics and the ops endpoint (each off unless configured); readiness checks: redis, started, shutdown.
  // When it cannot start (its port taken), what was started before it stops, so the process exits.
  const obs = await startWorkerObservability({
    env,
    opsPort: options.opsPort,
    redis,
    logger,
    scrubber,
    instanceId: housekeeping.instanceId,
    logPrefix: cfg.logPrefix,
    queuePrefix: cfg.queuePrefix,
    queueName: cfg.queueName,
  }).catch(async (err: unknown) => {
    housekeeping.stop();
    // Ended once set up: ioredis holds the process 2 s on a connection dropped in its handshake.
    await boundedWait(redis.ping(), 1000);
    if (!(await boundedWait(redis.quit(), 1000))) redis.disconnect();
    await boundedWait(telemetry.shutdown(), 1000);
    throw err;
  });
  return { env, cfg, logger, scrubber, housekeeping, telemetry, redis, obs };
}

/** Checks the durability level and starts the turn worker; on failure, stops the process's parts and rethrows. */
async function startWorkerIn(parts: ProcessParts, options: WorkerMainOptions): Promise<TurnWorker> {
  const { cfg, housekeeping, obs, redis, telemetry } = parts;
  try {
    // A level the server cannot give is refused before any turn is taken (fsync on Redis < 7.2
    // without appendfsync always).
    await checkDurability(redis, parseDurability(cfg.durability, "TURNSTREAM_DURABILITY"));
    // The environment's options, then what only the process has: its connection, logger, scrubber and telemetry.
    return startTurnWorker({
      ...cfg,
      ...options.workerOptions,
      instanceId: housekeeping.instanceId,
      concurrency: options.concurrency ?? cfg.concurrency,
      redis,
      logger: parts.logger,
      scrubber: parts.scrubber,
      secretEnv: parts.env,
      telemetry,
      observers: obs.observers,
      onLogAppend: obs.onLogAppend,
      cliMetrics: obs.cliMetrics,
    });
  } catch (err) {
    housekeeping.stop();
    await obs.close();
    redis.disconnect();
    await boundedWait(telemetry.shutdown(), 1000);
    throw err;
  }
}

/** TURNSTREAM_SHUTDOWN_GRACE_MS when it is a number ≥ 0, else 30 s. */
function shutdownGraceMs(env: Readonly<Record<string, string | undefined>>): number {
  const graceRaw = Number(env["TURNSTREAM_SHUTDOWN_GRACE_MS"]);
  return Number.isFinite(graceRaw) && graceRaw >= 0 ? graceRaw : 30_000;
}

/** Reports the worker started, adds its instance check to readiness, and logs that it is ready. */
function markReady(parts: ProcessParts, worker: TurnWorker): void {
  const { obs, logger, housekeeping } = parts;
  obs.started(worker);
  // Two processes must never run as one instance: the second is not ready while the first lives.
  obs.addCheck({
    name: "instance_taken",
    check: () => (worker.instanceTaken ? "another process holds this instance id" : true),
  });
  logger.info(
    {
      worker: worker.id,
      pid: process.pid,
      concurrency: worker.worker.opts.concurrency,
      roots: parts.cfg.workspaceRoots,
    },
    "worker ready",
  );
  logger.info({ instance: housekeeping.instanceId, instanceRoot: housekeeping.instanceRoot }, "instance id held");
}

/** Resolves on the first SIGTERM or SIGINT, after marking the process not ready. */
function untilSignal(parts: ProcessParts): Promise<void> {
  return new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      parts.logger.info({ signal }, "signal received; stopping");
      parts.obs.stopping();
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
      resolve();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
}

/** After the worker has closed: gives the instance id up, flushes spans and metrics, closes Redis. */
async function stopProcessParts(parts: ProcessParts): Promise<void> {
  const { housekeeping, telemetry, obs, redis, logger } = parts;
  housekeeping.stop();
  // The last spans (attempts ended by the shutdown) go out before the process exits.
  if (!(await boundedWait(telemetry.shutdown(), 5000)))
    logger.warn({}, "telemetry did not flush within 5 s; some spans may be lost");
  if (!(await boundedWait(obs.close(), 5000))) logger.warn({}, "metrics did not flush within 5 s");
  if (!(await boundedWait(redis.quit(), 1000))) redis.disconnect();
}
