// A worker process: configuration from the environment, the scrubbing logger, SIGTERM/SIGINT → a
// bounded shutdown. Used by workers/turn-worker.ts and `turnstream worker`.
import { checkDurability, connectRedis, explainRedisError, parseDurability, redisAddress } from "../log/index.ts";
import {
  createLogger,
  createScrubber,
  routeConsoleToLogger,
  startTelemetry,
  warnRemovedEnvVars,
} from "../telemetry/index.ts";
import { workerConfigFromEnv } from "./config.ts";
import { DEFAULT_SWEEP_INTERVAL_MS, startHousekeeping } from "./housekeeping.ts";
import { startWorkerObservability } from "./observability.ts";
import { DEFAULT_PREFIX, errorReporter } from "../kernel/index.ts";
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

/** Starts the worker and resolves with the exit code once a signal has shut it down. */
export async function runWorkerMain(options: WorkerMainOptions = {}): Promise<number> {
  const env = options.env ?? process.env;
  const cfg = workerConfigFromEnv(env);
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
  const obs = await startWorkerObservability({
    env,
    opsPort: options.opsPort,
    redis,
    logger,
    scrubber,
    instanceId: housekeeping.instanceId,
    logPrefix: cfg.logPrefix ?? DEFAULT_PREFIX,
    queuePrefix: cfg.queuePrefix ?? DEFAULT_QUEUE_PREFIX,
    queueName: cfg.queueName ?? DEFAULT_QUEUE_NAME,
  });
  let worker: TurnWorker;
  try {
    // A level the server cannot give is refused before any turn is taken (fsync on Redis < 7.2
    // without appendfsync always).
    await checkDurability(redis, parseDurability(cfg.durability, "TURNSTREAM_DURABILITY"));
    // The environment's options, then what only the process has: its connection, logger, scrubber and telemetry.
    worker = startTurnWorker({
      ...cfg,
      ...options.workerOptions,
      instanceId: housekeeping.instanceId,
      concurrency: options.concurrency ?? cfg.concurrency,
      redis,
      logger,
      scrubber,
      secretEnv: env,
      telemetry,
      observers: obs.observers,
      onLogAppend: obs.onLogAppend,
    });
  } catch (err) {
    housekeeping.stop();
    await obs.close();
    redis.disconnect();
    await boundedWait(telemetry.shutdown(), 1000);
    throw err;
  }
  const graceRaw = Number(env["TURNSTREAM_SHUTDOWN_GRACE_MS"]);
  const graceMs = options.graceMs ?? (Number.isFinite(graceRaw) && graceRaw >= 0 ? graceRaw : 30_000);
  if (cfg.operatorKeys === undefined)
    logger.warn(
      {},
      "no TURNSTREAM_OPERATOR_KEYS: supervised turns will fail, since no operator decision could be verified",
    );
  await worker.ready();
  obs.started(worker);
  // Two processes must never run as one instance: the second is not ready while the first lives.
  obs.addCheck({ name: "fenced", check: () => (worker.fenced ? "another process holds this instance id" : true) });
  logger.info(
    { worker: worker.id, pid: process.pid, concurrency: worker.worker.opts.concurrency, roots: cfg.workspaceRoots },
    "worker ready",
  );
  logger.info({ instance: housekeeping.instanceId, instanceRoot: housekeeping.instanceRoot }, "instance id held");
  await new Promise<void>((resolve) => {
    const onSignal = (sig: NodeJS.Signals): void => {
      logger.info({ signal: sig }, "signal received; stopping");
      obs.stopping();
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
      resolve();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
  await worker.close({ graceMs });
  housekeeping.stop();
  // The last spans (attempts ended by the shutdown) go out before the process exits.
  if (!(await boundedWait(telemetry.shutdown(), 5000)))
    logger.warn({}, "telemetry did not flush within 5 s; some spans may be lost");
  if (!(await boundedWait(obs.close(), 5000))) logger.warn({}, "metrics did not flush within 5 s");
  if (!(await boundedWait(redis.quit(), 1000))) redis.disconnect();
  logger.info({ worker: worker.id }, "worker stopped");
  return 0;
}
