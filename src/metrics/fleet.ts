// Fleet-wide gauges: the queue by state and its oldest waiting job, the pending decisions and the
// oldest of them. Every process that has a source reports the same values (they are read from Redis,
// not counted locally), so dashboards aggregate them with max across instances, never sum: max stays
// right when some processes are down or lagging, and no process has to be elected to report them.
// One callback reads everything per collection, with one bounded wait: a Redis that does not answer
// in time leaves these gauges out of that scrape rather than holding the scrape up.
import type { BatchObservableResult, Meter } from "@opentelemetry/api";
import type { Queue } from "bullmq";
import { parsePendingEntry, pendingKey } from "../decisions/index.ts";
import { withTimeout, type Logger } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { QUEUE_STATES, readWaitingTurns, type WaitingSource } from "../queue/index.ts";
import { gauge } from "./instruments.ts";
import { METRICS } from "./names.ts";

/** The part of a BullMQ Queue the gauges read. */
export type QueueCountsSource = WaitingSource & Pick<Queue, "getJobCounts">;

export interface FleetSources {
  /** The Redis of the decision index. */
  redis: RedisClient;
  /** Key prefix of the event log (the decision index lives under it). */
  logPrefix: string;
  /** The turn queue; without it the queue gauges are not reported. */
  queue?: QueueCountsSource | undefined;
  /** Longest a collection waits for Redis (default 2000 ms). */
  collectTimeoutMs?: number;
}

interface FleetReading {
  counts?: Record<string, number>;
  oldestWaitS?: number;
  pending: number;
  oldestPendingS: number;
}

async function readQueue(queue: QueueCountsSource, now: number): Promise<Pick<FleetReading, "counts" | "oldestWaitS">> {
  const [counts, waiting] = await Promise.all([queue.getJobCounts(...QUEUE_STATES), readWaitingTurns(queue, now)]);
  return {
    counts,
    oldestWaitS: waiting.oldestQueuedAt === undefined ? 0 : Math.max(0, (now - waiting.oldestQueuedAt) / 1000),
  };
}

/** Pending requests in the decision index that have not expired, and how long the oldest has waited. */
async function readPending(
  redis: RedisClient,
  prefix: string,
  now: number,
): Promise<Pick<FleetReading, "pending" | "oldestPendingS">> {
  const values = await redis.hvals(pendingKey(prefix));
  let pending = 0;
  let oldest = now;
  for (const stored of values) {
    const entry = parsePendingEntry(stored);
    if (entry === undefined) continue;
    // Gone from the gauge once expired (`turnstream pending` still lists it for EXPIRED_GRACE_MS).
    const requested = Date.parse(entry.requestedAt);
    const expires = Date.parse(entry.expiresAt);
    if (!Number.isFinite(requested) || (Number.isFinite(expires) && expires <= now)) continue;
    pending++;
    oldest = Math.min(oldest, requested);
  }
  return { pending, oldestPendingS: Math.max(0, (now - oldest) / 1000) };
}

async function readFleet(sources: FleetSources): Promise<FleetReading> {
  const now = Date.now();
  const [queue, pending] = await Promise.all([
    sources.queue === undefined ? {} : readQueue(sources.queue, now),
    readPending(sources.redis, sources.logPrefix, now),
  ]);
  return { ...queue, ...pending };
}

/** Registers the fleet gauges on `meter`. */
export function fleetGauges(meter: Meter, sources: FleetSources, logger: Logger): void {
  const depth = gauge(meter, METRICS.queueDepth);
  const oldestWait = gauge(meter, METRICS.queueOldestWaitAge);
  const pending = gauge(meter, METRICS.decisionsPending);
  const oldestPending = gauge(meter, METRICS.decisionsOldestPendingAge);
  const timeoutMs = sources.collectTimeoutMs ?? 2000;
  meter.addBatchObservableCallback(
    async (observation: BatchObservableResult) => {
      let reading: FleetReading;
      try {
        reading = await withTimeout(readFleet(sources), timeoutMs, `Redis did not answer within ${timeoutMs} ms`);
      } catch (err) {
        logger.debug({ err: { message: (err as Error).message } }, "fleet gauges not read this time");
        return;
      }
      if (reading.counts !== undefined)
        for (const state of QUEUE_STATES)
          observation.observe(depth, reading.counts[state] ?? 0, { "turnstream.queue.state": state });
      if (reading.oldestWaitS !== undefined) observation.observe(oldestWait, reading.oldestWaitS);
      observation.observe(pending, reading.pending);
      observation.observe(oldestPending, reading.oldestPendingS);
    },
    [depth, oldestWait, pending, oldestPending],
  );
}
