// Libraries write to the console when they have nowhere else to go (BullMQ prints an error event
// nobody listens to, ioredis an unhandled connection error with its stack): in a worker those land
// between pino's JSON lines as multi-line dumps, unscrubbed. Routed here, each call is one line of
// the scrubbing logger, and repeats of one message are counted, not written.
import { format } from "node:util";
import { RepeatLimiter, type Logger } from "../kernel/index.ts";

const LEVELS = { error: "error", warn: "warn", log: "info", info: "info", debug: "debug", trace: "debug" } as const;
type Method = keyof typeof LEVELS;

/**
 * The first line of what console would print; an error reads as its name and message (the rest of a stack is frames).
 */
function consoleMessage(args: readonly unknown[]): string {
  const text = format(...args.map((a) => (a instanceof Error ? `${a.name}: ${a.message}` : a)));
  const line = text.split("\n", 1)[0]!;
  // A stack passed as text (ioredis does) keeps its first line too, which names the error.
  return line.trimEnd();
}

/**
 * Sends console.error/warn/log/info/debug/trace through `logger` (error, warn, info, info, debug,
 * debug), one line per call with `source: "console"`, repeats of one message within the limiter's
 * interval dropped and counted in the next line's `suppressed`. Returns a function that restores
 * the console. For a process whose stdout is its log; never a command that prints to its user.
 */
export function routeConsoleToLogger(logger: Logger, limiter: RepeatLimiter = new RepeatLimiter()): () => void {
  const saved = Object.fromEntries(Object.keys(LEVELS).map((m) => [m, console[m as Method]]));
  for (const method of Object.keys(LEVELS) as Method[]) {
    const level = LEVELS[method];
    console[method] = (...args: unknown[]): void => {
      const msg = consoleMessage(args);
      const dropped = limiter.admit(`${method}\0${msg}`);
      if (dropped === undefined) return;
      logger[level](dropped > 0 ? { source: "console", suppressed: dropped } : { source: "console" }, msg);
    };
  }
  return () => void Object.assign(console, saved);
}
