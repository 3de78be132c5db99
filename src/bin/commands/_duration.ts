// Durations on the command line: `30s`, `10m`, `1h`, `7d`, `500ms` or plain milliseconds, so a
// pipeline's timeouts read the way its authors think of them.
import { parseDuration, TurnstreamError } from "../../kernel/index.ts";

export { parseDuration };

export class BadDurationError extends TurnstreamError {
  constructor(flag: string, value: string) {
    super(`--${flag} takes a duration such as 30s, 10m, 1h, 7d or plain milliseconds, got '${value}'`, {
      code: "bad_duration",
    });
  }
}

/** The flag's value in milliseconds (undefined when the flag is absent); throws BadDurationError when malformed. */
export function durationFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = parseDuration(value);
  if (ms === undefined) throw new BadDurationError(flag, value);
  return ms;
}

/** An age for people: `42s`, `3m12s`, `2h05m`, `3d04h` (whole seconds; never negative). */
export function formatAge(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  const two = (n: number): string => String(n).padStart(2, "0");
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${two(seconds % 60)}s`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h${two(Math.floor(seconds / 60) % 60)}m`;
  return `${Math.floor(seconds / 86_400)}d${two(Math.floor(seconds / 3600) % 24)}h`;
}
