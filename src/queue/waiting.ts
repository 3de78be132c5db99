// Which turns wait to run, and since when: read by `turnstream status` and the queue-age gauge, so
// both mean the same thing. Waiting = the wait list, prioritized jobs, and delayed jobs whose delay is
// over (only a worker moves those on, so without one they wait like the rest). Parked turns are not
// waiting to run, whatever state their jobs are in: a caller that knows them leaves them out.
import type { Queue } from "bullmq";

// The wait list is read from its old end; prioritized and due delayed jobs (never many while workers
// run) are sampled up to this many.
const SAMPLE = 100;

/** The part of a BullMQ Queue this reads (a test may pass a stand-in). */
export type WaitingSource = Pick<Queue, "getDelayedCount" | "getJobs">;

export interface WaitingTurns {
  /** Delayed jobs whose delay is over. */
  dueDelayed: number;
  /** When the oldest waiting turn was queued (ms since the epoch); undefined when none waits. */
  oldestQueuedAt: number | undefined;
}

const NONE: ReadonlySet<string> = new Set();

/**
 * Due delayed jobs and the oldest waiting turn's queue time. `parked`: turns that are parked (their
 * jobs wait out a delay until their request's deadline, or were woken for a decision): not turns
 * waiting to run, so left out of the oldest (the lists are read that much further).
 */
export async function readWaitingTurns(
  queue: WaitingSource,
  now: number,
  parked: ReadonlySet<string> = NONE,
): Promise<WaitingTurns> {
  const dueDelayed = await queue.getDelayedCount(now);
  const lists = await Promise.all([
    queue.getJobs(["wait"], 0, parked.size, true),
    queue.getJobs(["prioritized"], 0, SAMPLE + parked.size - 1, true),
    dueDelayed > 0 ? queue.getJobs(["delayed"], 0, Math.min(dueDelayed, SAMPLE + parked.size) - 1, true) : [],
  ]);
  let oldest: number | undefined;
  for (const job of lists.flat()) {
    if (job === undefined || job.timestamp <= 0 || (job.id !== undefined && parked.has(job.id))) continue;
    if (oldest === undefined || job.timestamp < oldest) oldest = job.timestamp;
  }
  return { dueDelayed, oldestQueuedAt: oldest };
}
