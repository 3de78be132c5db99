// Whether any worker listens on a queue: what `turnstream run --wait` warns about on stderr and a
// producer's waitForTurn through its logger, since a turn nobody serves waits without a word.
import type { Queue } from "bullmq";

/** How long the check may take before it gives up and says nothing. */
export const WORKER_CHECK_MS = 2000;

/**
 * How many workers listen on `queue`, or undefined when that cannot be told within `timeoutMs`.
 * BullMQ counts them from CLIENT LIST, which an ACL may refuse: then nothing is guessed. It runs on
 * BullMQ's connection, which retries a command for as long as Redis is gone: bounded, so a Redis that
 * dies right now is reported by whatever the caller does next, not hung on here.
 */
export async function liveWorkerCount(queue: Queue, timeoutMs = WORKER_CHECK_MS): Promise<number | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs)));
  const counted = queue.getWorkersCount().catch(() => undefined);
  return Promise.race([counted, gaveUp]).finally(() => clearTimeout(timer));
}

/** What to say when no worker listens on the queue named `queueName`. */
export function noWorkerWarning(queueName: string): string {
  return `no live worker on queue '${queueName}'; the turn waits until one starts (turnstream worker)`;
}
