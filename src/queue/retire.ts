// Removing an ended session's keys from Redis (retention), in one fenced script in the session's slot.
// The queue owns the script because it alone knows both key families it checks: the log's meta and
// the session's order (pending turns, lease, registered ids). What else goes with the session (read
// models) the caller names.
import { luaScript, scriptCommand, sessionKeys, sessionTag, type RedisClient } from "../log/index.ts";
import { orderKeys } from "./keys.ts";

const RETIRE = luaScript("turnstreamQueueRetire", 11, new URL("./lua/retire.lua", import.meta.url));

export type RetireOutcome = "removed" | "gone" | "pending" | "leased" | "restoring" | "appended" | "registered";

export interface RetireExpectation {
  /** The last seq of the copy that was kept: a log past it keeps the session. */
  lastSeq: number;
  /** How many turn ids the copy registered: one more means a turn was enqueued since. */
  registered: number;
  /** Further keys of this session (its hash tag) to delete with it. */
  alsoDelete?: readonly string[];
}

/** The key a restore holds while it writes a session back; the retire script refuses while it exists. */
export function restoringKey(logPrefix: string, session: string): string {
  return `${sessionTag(logPrefix, session)}:restoring`;
}

/** Deletes the session's keys unless it changed since `expect` was taken; says what it found. */
export async function retireSession(
  redis: RedisClient,
  logPrefix: string,
  session: string,
  expect: RetireExpectation,
): Promise<{ outcome: RetireOutcome; count: number }> {
  const log = sessionKeys(logPrefix, session);
  const order = orderKeys(logPrefix, session);
  const alsoDelete = expect.alsoDelete ?? [];
  const tag = `${sessionTag(logPrefix, session)}:`;
  for (const key of alsoDelete)
    if (!key.startsWith(tag)) throw new Error(`retire: ${key} is not a key of session ${session}`);
  const keys = [
    log.meta,
    order.turns,
    order.lease,
    order.registered,
    log.blobs,
    restoringKey(logPrefix, session),
    log.events,
    order.conf,
    order.cancel,
    order.deferred,
    order.warm,
  ];
  const retire = scriptCommand<[string, number]>(redis, RETIRE);
  // `count`: the keys removed, or the seq or registered count that made the script refuse.
  const [outcome, count] = await retire(keys, [expect.lastSeq, expect.registered, ...alsoDelete]);
  return { outcome: outcome as RetireOutcome, count: Number(count) };
}
