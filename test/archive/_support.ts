// What the archive tests share: real-looking logs (a recorded fixture loaded through a real EventLog
// on Redis and read back, so envelopes are exactly what the log gives) and copies built from them.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { logDigest, summarize, type SessionCopy, type SessionState } from "../../src/archive/index.ts";
import { connectRedis, createEventLog, importFile, type Envelope } from "../../src/log/index.ts";

export const FIXTURES = join(import.meta.dirname, "..", "fixtures", "logs");

export function uniqueId(stem: string): string {
  return `${stem}-${randomBytes(5).toString("hex")}`;
}

/**
 * A fixture's events as the log gives them back under `session`: imported into a real EventLog (own
 * key prefix), read, and the keys removed again.
 */
export async function loggedEvents(fixture: string, session: string): Promise<Envelope[]> {
  const redis = connectRedis();
  const prefix = `tar${randomBytes(5).toString("hex")}:`;
  try {
    const log = createEventLog({ redis, prefix });
    await importFile(log, session, join(FIXTURES, `${fixture}.jsonl`));
    const events: Envelope[] = [];
    for await (const envelope of log.read(session)) events.push(envelope);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    return events;
  } finally {
    redis.disconnect();
  }
}

export function stateOf(turns: number): SessionState {
  const registered: Record<string, string> = {};
  for (let index = 1; index <= turns; index++) registered[`t${index}`] = "1";
  return { meta: { epoch: "3", seq: "0" }, conf: { warm: "off" }, registered };
}

/** The archive copy of `events` (the first `upTo` of them when given). */
export function copyOf(session: string, events: readonly Envelope[], upTo = events.length): SessionCopy {
  const kept = events.slice(0, upTo);
  return {
    session,
    events: kept,
    state: stateOf(kept.filter((event) => event.kind === "turn.queued").length),
    summary: summarize(session, kept),
    digest: logDigest(kept),
  };
}

/** The JSON text of each envelope read, for byte-for-byte comparison. */
export async function readTexts(source: AsyncIterable<Envelope>): Promise<string[]> {
  const texts: string[] = [];
  for await (const envelope of source) texts.push(JSON.stringify(envelope));
  return texts;
}
