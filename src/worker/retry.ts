// How long to wait before the next attempt of a turn that failed with a retryable kind (the failure
// table in src/events/failures.ts says which): exponential in the attempt number, never earlier than
// the CLI's own hints (its last retry delay, the rate limit's reset time), bounded so a bogus reset
// time cannot park a turn for days.
import { backoffDelayMs } from "../kernel/index.ts";
import type { RetryHints } from "../protocol/index.ts";

export interface RetryPolicy {
  /** Attempts of one turn in all (crashed ones count). Default 5. */
  maxAttempts: number;
  baseMs: number;
  maxMs: number;
  /** Upper bound for a wait taken from a reset time. */
  maxWaitMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 5, baseMs: 2000, maxMs: 60_000, maxWaitMs: 15 * 60_000 };

export function retryDelayMs(
  policy: RetryPolicy,
  attempt: number,
  hints: RetryHints | undefined,
  now = Date.now(),
): number {
  const backoff = backoffDelayMs(attempt, { baseMs: policy.baseMs, maxMs: policy.maxMs, jitter: [0.9, 1.1] });
  // The CLI's hints are a floor: jitter may only push past them (spreading a fleet that hit the same
  // reset time), never undercut them.
  let floor = 0;
  if (hints?.resetsAtMs !== undefined && hints.resetsAtMs > now) floor = hints.resetsAtMs - now;
  if (hints?.retryDelayMs !== undefined) floor = Math.max(floor, hints.retryDelayMs);
  const hinted = floor * (1 + Math.random() * 0.1);
  return Math.round(Math.min(Math.max(backoff, hinted), policy.maxWaitMs));
}
