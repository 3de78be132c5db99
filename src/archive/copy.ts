// A session as it is archived: every event from seq 1 (blobs inlined) and the Redis-side state that
// is not in its events, read from Redis in one pass, with its summary row and digest.
import type { Envelope, EventLog, RedisClient } from "../log/index.ts";
import { orderKeys } from "../queue/index.ts";
import type { SessionCopy, SessionState } from "./archive.ts";
import { logDigest } from "./digest.ts";
import { summarize } from "./summary.ts";

/**
 * The session's meta, conf and registered hashes. Read before the events: a copy whose state is older
 * than its events is harmless (retention fences on the registered count and the last seq), the other
 * way round a turn registered after the events were read would be archived without its turn.queued.
 */
export async function sessionState(log: EventLog, redis: RedisClient, session: string): Promise<SessionState> {
  const order = orderKeys(log.prefix, session);
  const [meta, conf, registered] = await Promise.all([
    redis.hgetall(log.keys(session).meta),
    redis.hgetall(order.conf),
    redis.hgetall(order.registered),
  ]);
  return { meta, conf, registered };
}

/** Everything the archive keeps of a session, as Redis holds it now. */
export async function copyOfSession(log: EventLog, redis: RedisClient, session: string): Promise<SessionCopy> {
  const state = await sessionState(log, redis, session);
  const events: Envelope[] = [];
  for await (const event of log.read(session)) events.push(event);
  return { session, events, state, summary: summarize(session, events), digest: logDigest(events) };
}
