// The recent revocations: a revoked rule leaves the fleet's rule hash, so without this index nothing
// would show that it existed, who revoked it, when and why. A Redis list beside the rule hash, newest
// first, holding the rule as it was, its `rule.revoked` record and where that record is in the log.
// revokeRule writes an entry only after the record is in the log, so an entry never lacks one; the
// log stays the record, the index is what `rules list --revoked` and the dashboard read. Anyone who
// can write Redis can write the list: each entry is parsed, an unreadable one skipped and counted, and
// a record counts as signed only when its signature verifies (checkRevocation).
import { z as zod } from "zod";
import { ruleRevokedData, type RuleRevoked } from "../events/index.ts";
import type { RedisClient } from "../log/index.ts";
import type { OperatorKeyring } from "./operator-keys.ts";
import { ruleSchema, type TrustRule } from "./rules.ts";
import { checkRuleRevoked, type RuleCheck } from "./signing.ts";

/** How many revocations the index keeps: the newest; older ones remain in their sessions' logs. */
export const REVOKED_KEPT = 100;

export const revocationSchema = zod.object({
  /** The rule as it was in the store. */
  rule: ruleSchema,
  revoked: ruleRevokedData,
  /** Where the record is: the session's log, at event `seq`. */
  session: zod.string().min(1),
  seq: zod.number().int().positive(),
});
export type Revocation = zod.infer<typeof revocationSchema>;

export function revokedKey(prefix: string): string {
  return `${prefix}decisions:revoked`;
}

/** Adds a revocation at the head of the index and trims it to REVOKED_KEPT in the same transaction. */
export async function indexRevocation(redis: RedisClient, prefix: string, revocation: Revocation): Promise<void> {
  const key = revokedKey(prefix);
  const entry = JSON.stringify(revocationSchema.parse(revocation));
  await redis
    .multi()
    .lpush(key, entry)
    .ltrim(key, 0, REVOKED_KEPT - 1)
    .exec();
}

export interface RecentRevocations {
  /** Newest first. */
  revocations: Revocation[];
  /** Entries that are not revocations (written by hand, or by something else): not shown. */
  unreadable: number;
}

const parsedEntry = (stored: string): Revocation | undefined => {
  try {
    const parsed = revocationSchema.safeParse(JSON.parse(stored));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
};

/** The index's entries (at most REVOKED_KEPT, however long someone made the list), newest first. */
export async function readRevocations(redis: RedisClient, prefix: string): Promise<RecentRevocations> {
  const stored = await redis.lrange(revokedKey(prefix), 0, REVOKED_KEPT - 1);
  const revocations = stored.map(parsedEntry).filter((entry) => entry !== undefined);
  return { revocations, unreadable: stored.length - revocations.length };
}

const sameRule = (rule: TrustRule, revoked: RuleRevoked): boolean =>
  rule.id === revoked.ruleId && rule.pattern === revoked.pattern && rule.effect === revoked.effect;

/**
 * Whether a revocation's record verifies against the trusted keys, and names the rule the entry shows
 * (a signed record must not vouch for another rule pasted beside it).
 */
export function checkRevocation(revocation: Revocation, trusted: OperatorKeyring | undefined): RuleCheck {
  if (trusted !== undefined && !sameRule(revocation.rule, revocation.revoked))
    return { verified: false, why: "its record names another rule" };
  return checkRuleRevoked(revocation.revoked, trusted);
}

/** One revocation as `rules list --revoked --json` prints it and the dashboard shows it (escaped there). */
export interface RevocationRow {
  ruleId: string;
  effect: string;
  pattern: string;
  /** Who added the rule. */
  addedBy: string;
  revokedBy: string;
  revokedAt: string;
  reason: string | null;
  keyId: string | null;
  verified: boolean | null;
  why: string | null;
  session: string;
  seq: number;
}

export function revocationRow(revocation: Revocation, trusted: OperatorKeyring | undefined): RevocationRow {
  const { rule, revoked } = revocation;
  const check = checkRevocation(revocation, trusted);
  return {
    ruleId: rule.id,
    effect: rule.effect,
    pattern: rule.pattern,
    addedBy: rule.by,
    revokedBy: revoked.by,
    revokedAt: revoked.revokedAt,
    reason: revoked.reason === undefined || revoked.reason === "" ? null : revoked.reason,
    keyId: revoked.keyId ?? null,
    verified: check.verified,
    why: check.why ?? null,
    session: revocation.session,
    seq: revocation.seq,
  };
}
