// Durations as people write them: `500ms`, `30s`, `10m`, `12h`, `7d` or plain milliseconds. The
// commands' flags and the variables that hold a period (TURNSTREAM_RETENTION…) read them the same way.

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds of `text`, or undefined when it is not a positive duration. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (match === null) return undefined;
  const ms = Math.round(Number(match[1]) * UNIT_MS[match[2] ?? "ms"]!);
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined;
}
