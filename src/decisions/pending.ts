// The fleet-wide pending index: one Redis hash of requests waiting for an operator, a hint for
// `turnstream pending` (the session log stays the truth). Each hub keeps a heartbeat key alive; an
// entry whose hub is gone, or whose attempt was superseded by a newer epoch, is shown as abandoned.
import { z as zod } from "zod";
import { DEFAULT_PREFIX } from "../kernel/index.ts";
import { sessionKeys, type RedisClient } from "../log/index.ts";
import { riskClassSchema, type DecisionRequested } from "../events/index.ts";
import { SHELL_TOOLS } from "./tool-calls.ts";

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
  /** When it is denied unless decided: a parked request's deadline. */
  expiresAt: zod.string(),
  /**
   * Set once the turn parked on it: no worker holds it; a decision wakes the turn through the queue's
   * wake list, and its `turn.parked` is at `seq`.
   */
  parked: zod
    .object({
      queue: zod.string(),
      seq: zod.number().int(),
      at: zod.string(),
      /** Decided, waiting for a worker to resume it: kept so a worker finds it if the wake-up is lost. */
      decided: zod.literal(true).optional(),
    })
    .optional(),
});
export type PendingEntry = zod.infer<typeof pendingEntrySchema>;

export interface PendingRequest extends PendingEntry {
  /**
   * abandoned: the worker holding it is gone or its attempt was superseded; the retry asks again.
   * parked: its turn waits with nothing held until it is decided or its deadline passes.
   */
  status: "pending" | "parked" | "abandoned";
}

export const pendingKey = (prefix: string): string => `${prefix}decisions:pending`;
export const hubKey = (prefix: string, hubId: string): string => `${prefix}decisions:hub:${hubId}`;
/** The list a queue's workers take wake-ups of decided parked turns from (`<session> <turn>` items). */
export const wakeKey = (prefix: string, queue: string): string => `${prefix}decisions:wake:${queue}`;
export const pendingField = (session: string, requestId: string): string => `${session}/${requestId}`;

/** Entries this long past their expiry are removed from the index by the next listing. */
export const EXPIRED_GRACE_MS = 60_000;

/** Where a request was recorded: its session, turn, attempt and epoch, its seq, and when (ISO). */
export interface RequestPlace {
  session: string;
  turn: string;
  attempt: number;
  epoch: number;
  seq: number;
  requestedAt: string;
}

/** The index entry of a recorded request. */
export function pendingEntryOf(requested: DecisionRequested, place: RequestPlace): PendingEntry {
  return {
    ...place,
    requestId: requested.requestId,
    tool: requested.tool,
    riskClass: requested.riskClass,
    input: requested.input,
    // The exact command (scrubbed), shown apart from the model's description of it.
    command: SHELL_TOOLS.has(requested.tool) ? requested.subject : undefined,
    redacted: requested.redacted,
    hubId: requested.hubId,
    expiresAt: requested.expiresAt,
  };
}

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

/**
 * Whether a request's attempt can no longer receive a decision: a waiting one's hub is gone or its
 * epoch was superseded; a parked one's turn is no longer parked at that epoch (resumed, cancelled).
 */
export async function isAbandoned(
  redis: RedisClient,
  prefix: string,
  entry: Pick<PendingEntry, "session" | "epoch" | "hubId" | "parked">,
): Promise<boolean> {
  const meta = sessionKeys(prefix, entry.session).meta;
  if (entry.parked !== undefined) {
    const [epoch, state] = await redis.hmget(meta, "epoch", "state");
    return Number(epoch ?? 0) !== entry.epoch || state !== "parked";
  }
  const [hub, epoch] = await Promise.all([redis.exists(hubKey(prefix, entry.hubId)), redis.hget(meta, "epoch")]);
  return hub === 0 || Number(epoch ?? 0) > entry.epoch;
}

/**
 * A parked request was decided: its entry stays, marked, until a worker resumes the turn (so a worker
 * finds it even if the wake-up is lost), and the turn's queue is asked to resume it now.
 */
export async function wakeParked(
  redis: RedisClient,
  prefix: string,
  parked: { session: string; turn: string; queue: string },
  entry: PendingEntry | undefined,
): Promise<void> {
  if (entry?.parked !== undefined) {
    const decided: PendingEntry = { ...entry, parked: { ...entry.parked, decided: true } };
    await redis.hset(pendingKey(prefix), pendingField(entry.session, entry.requestId), JSON.stringify(decided));
  }
  await redis.lpush(wakeKey(prefix, parked.queue), `${parked.session} ${parked.turn}`);
}

/** Every entry of the index as stored (parked ones included, decided or not). */
export async function readPendingEntries(redis: RedisClient, prefix: string): Promise<PendingEntry[]> {
  const all = await redis.hgetall(pendingKey(prefix));
  return Object.values(all).flatMap((stored) => parsePendingEntry(stored) ?? []);
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
    const abandoned = await isAbandoned(options.redis, prefix, entry);
    // A parked turn that went on (resumed, cancelled) leaves nothing to decide here.
    if (abandoned && entry.parked !== undefined) {
      stale.push(field);
      continue;
    }
    if (entry.parked?.decided === true) continue;
    out.push({ ...entry, status: abandoned ? "abandoned" : entry.parked !== undefined ? "parked" : "pending" });
  }
  if (stale.length > 0) await options.redis.hdel(pendingKey(prefix), ...stale).catch(() => undefined);
  return out.sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
}
