// A worker process's metrics and ops endpoint, set up together: the meter provider from OTEL_*, the
// event observer and gauges that feed it, and the /metrics, /healthz, /readyz server. Readiness is
// the ops server's list of named checks; this adds `redis` and `started`, and the process adds its own
// through `addCheck`.
import { Queue } from "bullmq";
import type { EventObserver } from "../events/index.ts";
import type { Logger } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { startMetrics, workerInstruments, type WorkerInstruments } from "../metrics/index.ts";
import { startProcessOps, type ReadinessCheck } from "../ops/index.ts";
import type { CliMetricsSink, Scrubber } from "../telemetry/index.ts";
import type { TurnWorker } from "./worker.ts";

export interface WorkerObservabilityOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** --ops-port; wins over TURNSTREAM_OPS_PORT. */
  opsPort?: string | undefined;
  redis: RedisClient;
  logger: Logger;
  scrubber: Scrubber;
  /** service.instance.id of the metrics. */
  instanceId: string;
  /** Where the decision index and the queue are (the worker's settings). */
  logPrefix: string;
  queuePrefix: string;
  queueName: string;
}

export interface WorkerObservability {
  /** For startTurnWorker's `observers` (empty when metrics are off). */
  readonly observers: readonly EventObserver[];
  /** For startTurnWorker's `onLogAppend`. */
  readonly onLogAppend: ((seconds: number) => void) | undefined;
  /** For startTurnWorker's `cliMetrics` (undefined when metrics are off: the CLIs are not asked for theirs). */
  readonly cliMetrics: CliMetricsSink | undefined;
  /** A readiness check more (no-op without an ops server). */
  addCheck(check: ReadinessCheck): void;
  /** The worker is up: its gauges start reporting and `started` passes. */
  started(worker: TurnWorker): void;
  /** Shutdown began: /readyz fails from now on. */
  stopping(): void;
  /** Flushes the last metrics and closes the server. */
  close(): Promise<void>;
}

export async function startWorkerObservability(options: WorkerObservabilityOptions): Promise<WorkerObservability> {
  let queue: Queue | undefined;
  let instruments: WorkerInstruments | undefined;
  let worker: TurnWorker | undefined;
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
        instanceId: options.instanceId,
        serviceName: "turnstream-worker",
      });
      // Counts only: the process's own connection serves it (a BullMQ worker's blocking one would not).
      queue = metrics.enabled
        ? new Queue(options.queueName, { connection: options.redis as never, prefix: options.queuePrefix })
        : undefined;
      instruments = metrics.enabled
        ? workerInstruments(metrics.meter, {
            scrubber: options.scrubber,
            redis: options.redis,
            logPrefix: options.logPrefix,
            queue,
            logger: options.logger,
          })
        : undefined;
      return metrics;
    },
    isStarted: () => worker !== undefined,
    closeSources: async () => {
      await queue?.close();
    },
  });
  return {
    observers: instruments === undefined ? [] : [instruments.observer],
    onLogAppend: instruments?.onLogAppend,
    cliMetrics: instruments?.cliMetrics,
    addCheck: (check) => ops.addCheck(check),
    started(turnWorker) {
      worker = turnWorker;
      instruments?.bindWorker(turnWorker);
    },
    stopping: () => ops.stopping(),
    close: () => ops.close(),
  };
}
