// The fleet-wide pending index: one Redis hash of requests waiting for an operator, a hint for
// `turnstream pending` (the session log stays the truth). Each hub keeps a heartbeat key alive; an
// entry whose hub is gone, or whose attempt was superseded by a newer epoch, is shown as abandoned.
import { z } from "zod";
import { DEFAULT_PREFIX } from "../kernel/index.ts";
import { sessionKeys, type RedisClient } from "../log/index.ts";
import { riskClassSchema } from "../events/index.ts";

export const pendingEntrySchema = z.object({
  session: z.string(),
  requestId: z.string(),
  turn: z.string(),
  attempt: z.number().int(),
  epoch: z.number().int(),
  /** Seq of the decision.requested event in the session log. */
  seq: z.number().int(),
  tool: z.string(),
  riskClass: riskClassSchema,
  input: z.string(),
  /** A shell tool's exact command (scrubbed); absent when too long to record or not a shell tool. */
  command: z.string().optional(),
  /** The model's own description of the call: its claim, not what runs. */
  description: z.string().optional(),
  /** What the scrubber took out of the shown input (see decision.requested); absent when nothing. */
  redacted: z.array(z.string()).optional(),
  hubId: z.string(),
  requestedAt: z.string(),
  expiresAt: z.string(),
});
export type PendingEntry = z.infer<typeof pendingEntrySchema>;

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
    const p = pendingEntrySchema.safeParse(JSON.parse(text));
    return p.success ? p.data : undefined;
  } catch {
    return undefined;
  }
}

export async function putPending(redis: RedisClient, prefix: string, e: PendingEntry): Promise<void> {
  await redis.hset(pendingKey(prefix), pendingField(e.session, e.requestId), JSON.stringify(e));
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
  const v = await redis.hget(pendingKey(prefix), pendingField(session, requestId));
  return v === null ? undefined : parsePendingEntry(v);
}

/** Whether a request's attempt can still receive a decision: its hub is alive and its epoch current. */
export async function isAbandoned(
  redis: RedisClient,
  prefix: string,
  e: Pick<PendingEntry, "session" | "epoch" | "hubId">,
): Promise<boolean> {
  const [hub, epoch] = await Promise.all([
    redis.exists(hubKey(prefix, e.hubId)),
    redis.hget(sessionKeys(prefix, e.session).meta, "epoch"),
  ]);
  return hub === 0 || Number(epoch ?? 0) > e.epoch;
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
  for (const [field, v] of Object.entries(all)) {
    const e = parsePendingEntry(v);
    if (e === undefined || Date.parse(e.expiresAt) + EXPIRED_GRACE_MS < now) {
      stale.push(field);
      continue;
    }
    out.push({ ...e, status: (await isAbandoned(options.redis, prefix, e)) ? "abandoned" : "pending" });
  }
  if (stale.length > 0) await options.redis.hdel(pendingKey(prefix), ...stale).catch(() => undefined);
  return out.sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
}
