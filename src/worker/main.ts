// A worker process: configuration from the environment, the scrubbing logger, SIGTERM/SIGINT → a
// bounded shutdown. Used by workers/turn-worker.ts and `turnstream worker`.
import { connectRedis } from "../log/index.ts";
import { createLogger, createScrubber, startTelemetry } from "../telemetry/index.ts";
import { workerConfigFromEnv } from "./config.ts";
import { startTurnWorker, type TurnWorker } from "./worker.ts";

export interface WorkerMainOptions {
  env?: Readonly<Record<string, string | undefined>>;
  /** Overrides TURNSTREAM_CONCURRENCY. */
  concurrency?: number;
  /** Shutdown grace period (default TURNSTREAM_SHUTDOWN_GRACE_MS or 30 s). */
  graceMs?: number;
}

function bounded(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(() => true, () => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Starts the worker and resolves with the exit code once a signal has shut it down. */
export async function runWorkerMain(options: WorkerMainOptions = {}): Promise<number> {
  const env = options.env ?? process.env;
  const cfg = workerConfigFromEnv(env);
  const scrubber = createScrubber({ env: env as Record<string, string | undefined> });
  const logger = createLogger({ scrubber, base: { service: "turn-worker" }, env });
  // Off unless OTEL_* configures an exporter; spans pass the redacting exporter either way.
  const telemetry = startTelemetry({ scrubber, env });
  const redis = connectRedis({ env: env as NodeJS.ProcessEnv });
  redis.on("error", (err: Error) => logger.warn({ err: { message: err.message } }, "redis connection error"));
  let worker: TurnWorker;
  try {
    worker = startTurnWorker({
      redis,
      workspaceRoots: cfg.workspaceRoots,
      concurrency: options.concurrency ?? cfg.concurrency,
      instanceId: cfg.instanceId,
      sandboxed: cfg.sandboxed,
      allowEnv: cfg.allowEnv,
      workspaceTrust: cfg.workspaceTrust,
      ...(cfg.mcpConfigFile !== undefined ? { mcpConfigFile: cfg.mcpConfigFile } : {}),
      ...(cfg.operatorKeys !== undefined ? { operatorKeys: cfg.operatorKeys } : {}),
      logger,
      scrubber,
      secretEnv: env,
      telemetry,
      keepRawLines: cfg.keepRawLines,
      ...(cfg.maxOutputLines !== undefined ? { maxOutputLines: cfg.maxOutputLines } : {}),
      ...(cfg.maxOutputBytes !== undefined ? { maxOutputBytes: cfg.maxOutputBytes } : {}),
      ...(cfg.instanceRoot !== undefined ? { instanceRoot: cfg.instanceRoot } : {}),
      ...(cfg.leaseMs !== undefined ? { leaseMs: cfg.leaseMs } : {}),
      ...(cfg.lockDuration !== undefined ? { lockDuration: cfg.lockDuration } : {}),
      ...(cfg.stalledInterval !== undefined ? { stalledInterval: cfg.stalledInterval } : {}),
      ...(cfg.logPrefix !== undefined ? { logPrefix: cfg.logPrefix } : {}),
      ...(cfg.queuePrefix !== undefined ? { queuePrefix: cfg.queuePrefix } : {}),
      ...(cfg.queueName !== undefined ? { queueName: cfg.queueName } : {}),
      ...(cfg.claudeBin !== undefined ? { claudeBin: cfg.claudeBin } : {}),
      ...(cfg.snapshotCacheBytes !== undefined ? { snapshotCacheBytes: cfg.snapshotCacheBytes } : {}),
    });
  } catch (err) {
    redis.disconnect();
    await bounded(telemetry.shutdown(), 1000);
    throw err;
  }
  const graceRaw = Number(env["TURNSTREAM_SHUTDOWN_GRACE_MS"]);
  const graceMs = options.graceMs ?? (Number.isFinite(graceRaw) && graceRaw >= 0 ? graceRaw : 30_000);
  if (cfg.operatorKeys === undefined) logger.warn({}, "no TURNSTREAM_OPERATOR_KEYS: supervised turns will fail, since no operator decision could be verified");
  await worker.ready();
  logger.info({ worker: worker.id, pid: process.pid, concurrency: options.concurrency ?? cfg.concurrency, roots: cfg.workspaceRoots }, "worker ready");
  await new Promise<void>((resolve) => {
    const onSignal = (sig: NodeJS.Signals): void => {
      logger.info({ signal: sig }, "signal received; stopping");
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
      resolve();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
  await worker.close({ graceMs });
  // The last spans (attempts ended by the shutdown) go out before the process exits.
  if (!(await bounded(telemetry.shutdown(), 5000))) logger.warn({}, "telemetry did not flush within 5 s; some spans may be lost");
  if (!(await Promise.race([redis.quit().then(() => true, () => true), new Promise<boolean>((r) => setTimeout(() => r(false), 1000))]))) redis.disconnect();
  logger.info({ worker: worker.id }, "worker stopped");
  return 0;
}
