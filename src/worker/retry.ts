// How long to wait before the next attempt of a turn that failed with a retryable kind: exponential
// in the attempt number, never earlier than the CLI's own hints (its last retry delay, the rate
// limit's reset time), bounded so a bogus reset time cannot park a turn for days.
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

/** Kinds worth another attempt; everything else (auth, invalid_request, bad payloads…) fails at once. */
export const RETRYABLE_KINDS: ReadonlySet<string> = new Set([
  "rate_limit",
  "overloaded",
  "server_error",
  "api_error",
  "timeout",
  "inactivity",
  "no_result",
]);

export function retryDelayMs(policy: RetryPolicy, attempt: number, hints: RetryHints | undefined, now = Date.now()): number {
  let ms = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  if (hints?.resetsAtMs !== undefined && hints.resetsAtMs > now) ms = Math.max(ms, hints.resetsAtMs - now);
  if (hints?.retryDelayMs !== undefined) ms = Math.max(ms, hints.retryDelayMs);
  ms = Math.min(ms, policy.maxWaitMs);
  return Math.round(ms * (0.9 + Math.random() * 0.2));
}
