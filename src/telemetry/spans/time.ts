// Span times are the events' `at`, so a re-export from the log reproduces the live timing exactly.

let lastText = "";
let lastMillis = Number.NaN;

/** Epoch milliseconds of an ISO time, or undefined when it does not parse. */
export function millisOf(at: string): number | undefined {
  // Consecutive events often share a millisecond stamp: skip re-parsing it.
  if (at === lastText) return lastMillis;
  const ms = Date.parse(at);
  if (Number.isNaN(ms)) return undefined;
  lastText = at;
  lastMillis = ms;
  return ms;
}
