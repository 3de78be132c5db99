// The projector as a long-running process: start, run until SIGTERM/SIGINT, stop cleanly within a
// bound. Shared by `turnstream projector` and workers/projector.ts.
import { DEFAULT_PREFIX, errorReporter, type Logger } from "../kernel/index.ts";
import { connectRedis, type RedisClient } from "../log/index.ts";
import {
  createLogger,
  createScrubber,
  routeConsoleToLogger,
  warnRemovedEnvVars,
  type Scrubber,
} from "../telemetry/index.ts";
import { startProjector, type ProjectorOptions } from "./live.ts";
import { startProjectorObservability } from "./observability.ts";
import { startPeriodic, type PeriodicTask } from "./periodic.ts";

export interface ProjectorProcessOptions extends Omit<ProjectorOptions, "redis" | "logger"> {
  redis: RedisClient;
  logger: Logger;
  /** Exit code after a clean stop is 0; a second signal during stop exits at once with 130. */
  exit?: (code: number) => void;
  /**
   * Metrics and the ops endpoint read TURNSTREAM_OPS_PORT, TURNSTREAM_OPS_HOST and OTEL_* from here (default
   * process.env).
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** --ops-port; wins over TURNSTREAM_OPS_PORT. */
  opsPort?: string | undefined;
  /** For metric labels and OTLP header values (the logger's). */
  scrubber: Scrubber;
  /** Work run every period besides projecting (retention); stopped, then closed, on the signal. */
  periodic?: readonly PeriodicTask[] | undefined;
  /** Called once the projector and the periodic work have stopped (what they shared: an archive). */
  close?: (() => Promise<void>) | undefined;
}

/**
 * What a projector process carries beyond its read models, built once Redis is connected: the
 * archive's periodic retention and its live summary rows (onCaughtUp), and how to close what they share.
 */
export type ProjectorAttachments = Pick<ProjectorProcessOptions, "periodic" | "onCaughtUp" | "close">;

export async function runProjectorProcess(options: ProjectorProcessOptions): Promise<number> {
  const { logger } = options;
  const obs = await startProjectorObservability({
    env: options.env ?? process.env,
    opsPort: options.opsPort,
    redis: options.redis,
    logger,
    scrubber: options.scrubber,
    prefix: options.prefix ?? DEFAULT_PREFIX,
  });
  const projector = startProjector(options);
  const periodic = (options.periodic ?? []).map((task) => startPeriodic(task, logger));
  obs.started(projector);
  logger.info({ version: projector.version, prefix: options.prefix ?? DEFAULT_PREFIX }, "projector started");
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    const on = (received: NodeJS.Signals): void => {
      process.off("SIGTERM", on);
      process.off("SIGINT", on);
      resolve(received);
    };
    process.on("SIGTERM", on);
    process.on("SIGINT", on);
  });
  const again = (): void => (options.exit ?? process.exit)(130);
  process.once("SIGTERM", again);
  process.once("SIGINT", again);
  logger.info({ signal }, "projector stopping");
  obs.stopping();
  await Promise.all(periodic.map((task) => task.stop()));
  await projector.stop();
  await options.close?.();
  await obs.close();
  process.off("SIGTERM", again);
  process.off("SIGINT", again);
  logger.info({ ...projector.stats }, "projector stopped");
  return 0;
}

/** What a projector process takes beyond its environment: the library's options, which no variable sets. */
export type ProjectorEntryOptions = Pick<ProjectorOptions, "version" | "rescanMs" | "batchEvents"> & {
  /** What this process carries besides projecting (workers/projector.ts: the archive's work). */
  attach?: (redis: RedisClient, prefix: string, logger: Logger) => Promise<ProjectorAttachments>;
};

/**
 * workers/projector.ts: a projector process configured by its environment (REDIS_URL or
 * REDIS_CLUSTER_NODES, TURNSTREAM_PREFIX, the ops endpoint's variables) and `options`. Resolves with
 * the exit code once a signal has stopped it.
 */
export async function runProjectorEntry(options: ProjectorEntryOptions = {}): Promise<number> {
  const env = process.env;
  const scrubber = createScrubber({ env });
  const logger = createLogger({ scrubber, base: { component: "projector" } });
  // What libraries print to the console goes through the logger: stdout holds only JSON lines.
  routeConsoleToLogger(logger);
  warnRemovedEnvVars(env, logger);
  const redis = connectRedis();
  const reportError = errorReporter(logger);
  redis.on("error", (err: Error) => reportError("redis connection error", err));
  const { attach, ...projectorOptions } = options;
  const prefix = env["TURNSTREAM_PREFIX"] ?? DEFAULT_PREFIX;
  const code = await runProjectorProcess({
    redis,
    logger,
    ...projectorOptions,
    prefix,
    scrubber,
    ...(await attach?.(redis, prefix, logger)),
  });
  redis.disconnect();
  return code;
}
