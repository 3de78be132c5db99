// While Redis is down every connection reports the same error on each reconnect attempt, several a
// second: logging each would bury everything else. So the first error of a kind is logged at once,
// repeats within the interval are only counted, and the count rides on the next line of that kind.
import { LRUCache } from "lru-cache";
import { isObj } from "./fields.ts";
import type { Logger } from "./logger.ts";

/** How long repeats of one error are counted instead of logged, by default. */
export const REPEAT_INTERVAL_MS = 30_000;
// Distinct errors remembered at once; messages that differ every time (ids, ports) cannot grow it.
const MAX_KINDS = 256;

/** Decides which of a stream of repeated keys get through: one per key per interval. */
export class RepeatLimiter {
  readonly #intervalMs: number;
  readonly #now: () => number;
  readonly #seen = new LRUCache<string, { at: number; dropped: number }>({ max: MAX_KINDS });

  constructor(intervalMs = REPEAT_INTERVAL_MS, now: () => number = Date.now) {
    this.#intervalMs = intervalMs;
    this.#now = now;
  }

  /**
   * The number of repeats dropped since the key last got through, when it gets through now; undefined when this one is
   * dropped.
   */
  admit(key: string): number | undefined {
    const now = this.#now();
    const seen = this.#seen.peek(key);
    if (seen !== undefined && now - seen.at < this.#intervalMs) {
      seen.dropped++;
      return undefined;
    }
    this.#seen.set(key, { at: now, dropped: 0 });
    return seen?.dropped ?? 0;
  }
}

/** What of an error goes into a log line: its name, message and code (never the stack, which is raw text). */
export function errorFields(err: unknown): { name?: string; message: string; code?: string } {
  if (!isObj(err)) return { message: String(err) };
  const out: { name?: string; message: string; code?: string } = { message: String(err["message"] ?? err) };
  if (typeof err["name"] === "string") out.name = err["name"];
  if (typeof err["code"] === "string" || typeof err["code"] === "number") out.code = String(err["code"]);
  return out;
}

/**
 * Logs a library's error events (a connection's, a queue's) at warn, one line per message per interval, with
 * `suppressed` counting the repeats in between.
 */
export type ErrorReporter = (msg: string, err: unknown, fields?: Record<string, unknown>) => void;

/** An ErrorReporter over `logger`. */
export function errorReporter(logger: Logger, limiter: RepeatLimiter = new RepeatLimiter()): ErrorReporter {
  return (msg, err, fields = {}) => {
    const errorInfo = errorFields(err);
    const dropped = limiter.admit(`${msg}\0${errorInfo.message}`);
    if (dropped === undefined) return;
    logger.warn(dropped > 0 ? { ...fields, err: errorInfo, suppressed: dropped } : { ...fields, err: errorInfo }, msg);
  };
}
