// The fleet-wide pending index: one Redis hash of requests waiting for an operator, a hint for
// `turnstream pending` (the session log stays the truth). Each hub keeps a heartbeat key alive; an
// entry whose hub is gone, or whose attempt was superseded by a newer epoch, is shown as abandoned.
import { z as zod } from "zod";
import { DEFAULT_PREFIX } from "../kernel/index.ts";
import { sessionKeys, type RedisClient } from "../log/index.ts";
import { riskClassSchema } from "../events/index.ts";

export const pendingEntrySchema = zod.object({
  session: zod.string(),
  requestId: zod.string(),
  turn: zod.string(),
  attempt: zod.number().int(),
  epoch: zod.number().int(),
  /** Seq of the decision.requested event in the session log. */
  seq: zod.number().int(),
  tool: zod.string(),
  riskClass: riskClassSchema,
  input: zod.string(),
  /** A shell tool's exact command (scrubbed); absent when too long to record or not a shell tool. */
  command: zod.string().optional(),
  /** The model's own description of the call: its claim, not what runs. */
  description: zod.string().optional(),
  /** What the scrubber took out of the shown input (see decision.requested); absent when nothing. */
  redacted: zod.array(zod.string()).optional(),
  hubId: zod.string(),
  requestedAt: zod.string(),
  expiresAt: zod.string(),
});
export type PendingEntry = zod.infer<typeof pendingEntrySchema>;

export interface PendingRequest extends PendingEntry {
  /** abandoned: the worker holding it is gone or its attempt was superseded; the retry asks again. */
  status: "pending" | "abandoned";
}

export const pendingKey = (prefix: string): string => `${prefix}decisions:pending`;
export const hubKey = (prefix: string, hubId: string): string => `${prefix}decisions:hub:${hubId}`;
export const pendingField = (session: string, requestId: string): string => `${session}/${requestId}`;

/** Entries this long past their expiry are removed from the index by the next listing. */
export const EXPIRED_GRACE_MS = 60_000;

/** One value of the index, or undefined when it is not JSON of an entry's shape. */
export function parsePendingEntry(text: string): PendingEntry | undefined {
  try {
    const parsed = pendingEntrySchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export async function putPending(redis: RedisClient, prefix: string, entry: PendingEntry): Promise<void> {
  await redis.hset(pendingKey(prefix), pendingField(entry.session, entry.requestId), JSON.stringify(entry));
}

export async function dropPending(
  redis: RedisClient,
  prefix: string,
  session: string,
  requestId: string,
): Promise<void> {
  await redis.hdel(pendingKey(prefix), pendingField(session, requestId));
}

export async function getPending(
  redis: RedisClient,
  prefix: string,
  session: string,
  requestId: string,
): Promise<PendingEntry | undefined> {
  const stored = await redis.hget(pendingKey(prefix), pendingField(session, requestId));
  return stored === null ? undefined : parsePendingEntry(stored);
}

/** Whether a request's attempt can still receive a decision: its hub is alive and its epoch current. */
export async function isAbandoned(
  redis: RedisClient,
  prefix: string,
  entry: Pick<PendingEntry, "session" | "epoch" | "hubId">,
): Promise<boolean> {
  const [hub, epoch] = await Promise.all([
    redis.exists(hubKey(prefix, entry.hubId)),
    redis.hget(sessionKeys(prefix, entry.session).meta, "epoch"),
  ]);
  return hub === 0 || Number(epoch ?? 0) > entry.epoch;
}

export interface ListPendingOptions {
  /** The Redis holding the fleet's pending index. */
  redis: RedisClient;
  /** Key prefix (default "ts:"). */
  prefix?: string;
}

/**
 * Pending requests across the fleet, oldest first; prunes entries long past their expiry when the
 * Redis user may write (a reader's listing just leaves them for the next operator's).
 */
export async function listPending(options: ListPendingOptions): Promise<PendingRequest[]> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const now = Date.now();
  const all = await options.redis.hgetall(pendingKey(prefix));
  const out: PendingRequest[] = [];
  const stale: string[] = [];
  for (const [field, stored] of Object.entries(all)) {
    const entry = parsePendingEntry(stored);
    if (entry === undefined || Date.parse(entry.expiresAt) + EXPIRED_GRACE_MS < now) {
      stale.push(field);
      continue;
    }
    out.push({ ...entry, status: (await isAbandoned(options.redis, prefix, entry)) ? "abandoned" : "pending" });
  }
  if (stale.length > 0) await options.redis.hdel(pendingKey(prefix), ...stale).catch(() => undefined);
  return out.sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
}
