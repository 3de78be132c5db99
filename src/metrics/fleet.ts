// Fleet-wide gauges: the queue by state and its oldest waiting job, the pending decisions and the
// oldest of them, the parked turns and the oldest of them, the model credentials cooling down. Every
// process that has a source reports the same values (they are read from Redis, not counted locally),
// so dashboards aggregate them with max across instances, never sum: max stays right when some
// processes are down or lagging, and no process has to be elected to report them.
// One callback reads everything per collection, with one bounded wait: a Redis that does not answer
// in time leaves these gauges out of that scrape rather than holding the scrape up.
import type { BatchObservableResult, Meter } from "@opentelemetry/api";
import type { Queue } from "bullmq";
import { countParked, parkedNow, readPendingEntries, type PendingEntry } from "../decisions/index.ts";
import { listCooldowns } from "../gateway/index.ts";
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
  parked: number;
  oldestParkedS: number;
  cooldowns: number;
}

/** `parked`: the parked turns, whose jobs are not turns waiting to run (left out of the oldest wait). */
async function readQueue(
  queue: QueueCountsSource,
  now: number,
  parked: ReadonlySet<string>,
): Promise<Pick<FleetReading, "counts" | "oldestWaitS">> {
  const [counts, waiting] = await Promise.all([
    queue.getJobCounts(...QUEUE_STATES),
    readWaitingTurns(queue, now, parked),
  ]);
  return {
    counts,
    oldestWaitS: waiting.oldestQueuedAt === undefined ? 0 : Math.max(0, (now - waiting.oldestQueuedAt) / 1000),
  };
}

/**
 * Requests in the decision index that wait for an operator and have not expired, and how long the
 * oldest has waited. A parked turn's request counts until it is decided: then it waits for a worker.
 */
function countPending(entries: readonly PendingEntry[], now: number): Pick<FleetReading, "pending" | "oldestPendingS"> {
  let pending = 0;
  let oldest = now;
  for (const entry of entries) {
    if (entry.parked?.decided === true) continue;
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
  const entries = await readPendingEntries(sources.redis, sources.logPrefix);
  const parked = countParked(await parkedNow(sources.redis, sources.logPrefix, entries), now);
  const queue = sources.queue === undefined ? {} : await readQueue(sources.queue, now, parked.turns);
  return {
    ...queue,
    ...countPending(entries, now),
    parked: parked.count,
    oldestParkedS: (parked.oldestAgeMs ?? 0) / 1000,
    cooldowns: (await listCooldowns(sources.redis, sources.logPrefix)).length,
  };
}

/** Registers the fleet gauges on `meter`. */
export function fleetGauges(meter: Meter, sources: FleetSources, logger: Logger): void {
  const depth = gauge(meter, METRICS.queueDepth);
  const oldestWait = gauge(meter, METRICS.queueOldestWaitAge);
  const pending = gauge(meter, METRICS.decisionsPending);
  const oldestPending = gauge(meter, METRICS.decisionsOldestPendingAge);
  const parked = gauge(meter, METRICS.turnsParked);
  const oldestParked = gauge(meter, METRICS.turnsOldestParkedAge);
  const cooldowns = gauge(meter, METRICS.gatewayCooldowns);
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
      observation.observe(parked, reading.parked);
      observation.observe(oldestParked, reading.oldestParkedS);
      observation.observe(cooldowns, reading.cooldowns);
    },
    [depth, oldestWait, pending, oldestPending, parked, oldestParked, cooldowns],
  );
}
