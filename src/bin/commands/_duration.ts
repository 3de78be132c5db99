// Durations on the command line: `30s`, `10m`, `1h`, `500ms` or plain milliseconds, so a pipeline's
// timeouts read the way its authors think of them.
import { TurnstreamError } from "../../kernel/index.ts";

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of `text`, or undefined when it is not a positive duration. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (match === null) return undefined;
  const ms = Math.round(Number(match[1]) * UNIT_MS[match[2] ?? "ms"]!);
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined;
}

export class BadDurationError extends TurnstreamError {
  constructor(flag: string, value: string) {
    super(`--${flag} takes a duration such as 30s, 10m, 1h or plain milliseconds, got '${value}'`, {
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
