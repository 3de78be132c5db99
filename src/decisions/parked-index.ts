// Parked turns as the pending index knows them, for the surfaces that count them (`turnstream status`,
// the fleet gauges): an entry marked parked whose turn is still parked at the entry's epoch. One that
// was decided counts until a worker resumes its turn; one whose turn went on (resumed, cancelled) does
// not. Read only: listing them never prunes the index (`listPending` does that for operators).
import { isAbandoned, readPendingEntries, type PendingEntry } from "./pending.ts";
import type { RedisClient } from "../log/index.ts";

/** A pending-index entry of a turn that is parked now. */
export type ParkedEntry = PendingEntry & { parked: NonNullable<PendingEntry["parked"]> };

/** The index's entries whose turns are parked now, oldest request first. */
export async function readParkedEntries(redis: RedisClient, prefix: string): Promise<ParkedEntry[]> {
  return parkedNow(redis, prefix, await readPendingEntries(redis, prefix));
}

/** Of entries read from the index, those whose turns are parked now, oldest request first. */
export async function parkedNow(
  redis: RedisClient,
  prefix: string,
  entries: readonly PendingEntry[],
): Promise<ParkedEntry[]> {
  const marked = entries.filter((entry): entry is ParkedEntry => entry.parked !== undefined);
  const parkedNow = await Promise.all(marked.map(async (entry) => !(await isAbandoned(redis, prefix, entry))));
  return marked.filter((_, index) => parkedNow[index]).sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
}

/**
 * Since when a parked turn has waited for its decision (ms since the epoch): its request's time. The
 * entry's `parked.at` is not it: a worker moves that on whenever it looks at the turn and parks it again.
 */
export function parkedSinceMs(entry: Pick<PendingEntry, "requestedAt">): number | undefined {
  const since = Date.parse(entry.requestedAt);
  return Number.isFinite(since) ? since : undefined;
}

/** How many turns are parked, and how long the oldest has waited (ms; undefined when none is). */
export interface ParkedCount {
  count: number;
  oldestAgeMs: number | undefined;
  /** Their turn ids: their jobs wait out a delay, and nobody should count them as turns waiting to run. */
  turns: ReadonlySet<string>;
  /** Of them, those decided and waiting for a worker to resume them. */
  decided: number;
}

export function countParked(entries: readonly ParkedEntry[], now: number): ParkedCount {
  let oldest: number | undefined;
  for (const entry of entries) {
    const since = parkedSinceMs(entry);
    if (since !== undefined && (oldest === undefined || since < oldest)) oldest = since;
  }
  return {
    count: entries.length,
    oldestAgeMs: oldest === undefined ? undefined : Math.max(0, now - oldest),
    turns: new Set(entries.map((entry) => entry.turn)),
    decided: entries.filter((entry) => entry.parked.decided === true).length,
  };
}
