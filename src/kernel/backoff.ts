// The one exponential backoff: every retry loop waits by it, so each site states only its figures.

export interface BackoffOptions {
  /** The wait before the first retry. */
  readonly baseMs: number;
  /** The wait never grows past this (before jitter). */
  readonly maxMs: number;
  /**
   * The range the capped wait is multiplied by, drawn uniformly, so clients that failed together do
   * not all come back together. None: the wait is exact.
   */
  readonly jitter?: readonly [lowest: number, highest: number];
}

// Past this many doublings any base exceeds any cap; keeps the power finite.
const MAX_DOUBLINGS = 30;

/** The wait before retry number `attempt` (1 for the first): `baseMs` doubled per earlier retry, capped at `maxMs`. */
export function backoffDelayMs(attempt: number, options: BackoffOptions): number {
  const doublings = Math.min(Math.max(0, attempt - 1), MAX_DOUBLINGS);
  const capped = Math.min(options.maxMs, options.baseMs * 2 ** doublings);
  if (options.jitter === undefined) return capped;
  const [lowest, highest] = options.jitter;
  return capped * (lowest + Math.random() * (highest - lowest));
}
