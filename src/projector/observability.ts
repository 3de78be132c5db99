// A projector process's metrics and ops endpoint. Readiness is Redis answering and not shutting
// down: projectors need no fencing check, since their commits are compare-and-set on the checkpoint
// (commit.lua), so two projectors on one session waste work but never corrupt a read model, and a
// superseded one stops by itself.
import { instanceStem, type Logger } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { fleetGauges, gauge, METRICS, startMetrics } from "../metrics/index.ts";
import { startProcessOps } from "../ops/index.ts";
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
  started(projector: Projector): void;
  stopping(): void;
  close(): Promise<void>;
}

export async function startProjectorObservability(
  options: ProjectorObservabilityOptions,
): Promise<ProjectorObservability> {
  const instanceId = `${instanceStem("projector")}-${process.pid}`;
  let projector: Projector | undefined;
  const ops = await startProcessOps({
    env: options.env,
    opsPort: options.opsPort,
    redis: options.redis,
    logger: options.logger,
    startMetrics: (opsEndpoint) => {
      const metrics = startMetrics({
        env: options.env,
        scrubber: options.scrubber,
        opsEndpoint,
        instanceId,
        serviceName: "turnstream-projector",
      });
      if (metrics.enabled) {
        fleetGauges(metrics.meter, { redis: options.redis, logPrefix: options.prefix }, options.logger);
        gauge(metrics.meter, METRICS.projectorLag).addCallback((result) => {
          if (projector !== undefined) result.observe(projector.lag);
        });
      }
      return metrics;
    },
    isStarted: () => projector !== undefined,
  });
  return {
    started: (p) => void (projector = p),
    stopping: () => ops.stopping(),
    close: () => ops.close(),
  };
}
