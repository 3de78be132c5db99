// A projector process's metrics and ops endpoint. Readiness is Redis answering and not shutting
// down: projectors need no fencing check, since their commits are compare-and-set on the checkpoint
// (commit.lua), so two projectors on one session waste work but never corrupt a read model, and a
// superseded one stops by itself.
import { hostname } from "node:os";
import type { Logger } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { fleetGauges, gauge, METRICS, startMetrics, type Metrics } from "../metrics/index.ts";
import { opsConfigFromEnv, redisReadiness, startOpsServer, type OpsServer } from "../ops/index.ts";
import type { Scrubber } from "../telemetry/index.ts";
import type { Projector } from "./live.ts";

export interface ProjectorObservabilityOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** --ops-port; wins over TURNSTREAM_OPS_PORT. */
  opsPort?: string | undefined;
  redis: RedisClient;
  logger: Logger;
  scrubber: Scrubber;
  prefix: string;
}

export interface ProjectorObservability {
  readonly metrics: Metrics;
  readonly ops: OpsServer | undefined;
  started(projector: Projector): void;
  stopping(): void;
  close(): Promise<void>;
}

export async function startProjectorObservability(options: ProjectorObservabilityOptions): Promise<ProjectorObservability> {
  const opsConfig = opsConfigFromEnv(options.env, options.opsPort);
  const instanceId = `projector-${hostname().replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 60)}-${process.pid}`;
  const metrics = startMetrics({ env: options.env, scrubber: options.scrubber, opsEndpoint: opsConfig !== undefined, instanceId, serviceName: "turnstream-projector" });
  let projector: Projector | undefined;
  if (metrics.enabled) {
    fleetGauges(metrics.meter, { redis: options.redis, logPrefix: options.prefix }, options.logger);
    gauge(metrics.meter, METRICS.projectorLag).addCallback((r) => {
      if (projector !== undefined) r.observe(projector.lag);
    });
  }
  const started = { name: "started", check: () => (projector !== undefined ? true : "starting") };
  let ops: OpsServer | undefined;
  try {
    ops = opsConfig === undefined ? undefined : await startOpsServer({ ...opsConfig, logger: options.logger, metrics: metrics.prometheus, checks: [redisReadiness(options.redis), started] });
  } catch (err) {
    await metrics.shutdown();
    throw err;
  }
  return {
    metrics,
    ops,
    started: (p) => void (projector = p),
    stopping: () => ops?.shuttingDown(),
    async close() {
      await metrics.shutdown().catch((err: unknown) => options.logger.warn({ err: { message: String(err) } }, "metrics did not flush"));
      await ops?.close();
    },
  };
}
