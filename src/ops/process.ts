// A long-running process's metrics and ops endpoint, started together the same way by the worker and
// the projector: the address from TURNSTREAM_OPS_PORT / --ops-port, then the process's metrics (told
// whether this process serves /metrics), then the server with the `redis` and `started` readiness checks.
// The metrics themselves are the caller's (this folder imports no metrics); it hands over their
// Prometheus handler and their shutdown.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../kernel/index.ts";
import { opsConfigFromEnv } from "./config.ts";
import { redisReadiness, startOpsServer, type OpsServer, type ReadinessCheck } from "./server.ts";

/** What the ops endpoint needs of a process's metrics. */
export interface ProcessMetrics {
  /** The Prometheus text handler for /metrics, when that reader is on. */
  readonly prometheus: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  shutdown(): Promise<void>;
}

export interface ProcessOpsOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** --ops-port; wins over TURNSTREAM_OPS_PORT. */
  opsPort?: string | undefined;
  redis: { ping(): Promise<unknown> };
  logger: Logger;
  /** Starts the process's metrics; `opsEndpoint`: whether this process serves /metrics. */
  startMetrics(opsEndpoint: boolean): ProcessMetrics;
  /** The `started` readiness check passes once this is true. */
  isStarted(): boolean;
  /** Closes what the process opened for its metrics, after they shut down (also when the server fails to start). */
  closeSources?: () => Promise<void>;
}

export interface ProcessOps {
  /** A readiness check more (no-op without an ops server). */
  addCheck(check: ReadinessCheck): void;
  /** Shutdown began: /readyz fails from now on. */
  stopping(): void;
  /** Flushes the last metrics and closes the server. */
  close(): Promise<void>;
}

/**
 * Starts the metrics and, when TURNSTREAM_OPS_PORT or --ops-port asks for one, the ops server; fails as the server's
 * listen does, with the metrics shut down.
 */
export async function startProcessOps(options: ProcessOpsOptions): Promise<ProcessOps> {
  const opsConfig = opsConfigFromEnv(options.env, options.opsPort);
  const metrics = options.startMetrics(opsConfig !== undefined);
  const started: ReadinessCheck = { name: "started", check: () => (options.isStarted() ? true : "starting") };
  let ops: OpsServer | undefined;
  try {
    ops =
      opsConfig === undefined
        ? undefined
        : await startOpsServer({
            ...opsConfig,
            logger: options.logger,
            metrics: metrics.prometheus,
            checks: [redisReadiness(options.redis), started],
          });
  } catch (err) {
    await metrics.shutdown();
    await options.closeSources?.();
    throw err;
  }
  return {
    addCheck: (check) => ops?.addCheck(check),
    stopping: () => ops?.shuttingDown(),
    async close() {
      await metrics
        .shutdown()
        .catch((err: unknown) => options.logger.warn({ err: { message: String(err) } }, "metrics did not flush"));
      await ops?.close();
      await options.closeSources?.().catch(() => undefined);
    },
  };
}
