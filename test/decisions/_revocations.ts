// Entries of the index of recent revocations as an attacker who can write Redis writes them by hand:
// markup and control characters in every text, a "signed" record whose signature is not over what it
// says, a genuinely signed record pasted beside another rule, and entries that are no revocation.
import { ruleId, revokedKey, signRuleRevoked, type Revocation } from "../../src/decisions/index.ts";
import type { RedisClient } from "../../src/log/index.ts";
import { operatorKey } from "../support/operator-keys.ts";

export const MARKUP = `<img src=x onerror="window.pwned=1">`;

/** A revocation of `pattern`, unsigned, recorded at `seq` of `session`. */
function revocation(pattern: string, by: string, session: string, seq: number): Revocation {
  const id = ruleId("allow", pattern);
  const at = new Date().toISOString();
  return {
    rule: { id, pattern, effect: "allow", by, at },
    revoked: { ruleId: id, pattern, effect: "allow", by, reason: `why ${by}`, revokedAt: at },
    session,
    seq,
  };
}

export interface Planted {
  hostile: Revocation;
  forged: Revocation;
  swapped: Revocation;
  /** How many planted entries are no revocation. */
  malformed: number;
}

/** The hostile entries, pushed (newest last: swapped) onto the index under `prefix`. */
export async function plantRevocations(redis: RedisClient, prefix: string, session: string): Promise<Planted> {
  const hostile = revocation(`Bash(${MARKUP}\u001b[31m)`, `eve\u202e${MARKUP}`, "javascript:window.pwned=2", 1);
  hostile.revoked.reason = `first\n\u001b]0;owned\u0007${MARKUP}`;
  // Signed by the trusted key for mallory's revocation, then made to say someone else revoked it.
  const signed = signRuleRevoked(operatorKey, revocation("Bash(curl *)", "mallory", session, 2).revoked);
  const forged: Revocation = {
    ...revocation("Bash(curl *)", "mallory", session, 2),
    revoked: { ...signed, by: "dana" },
  };
  // A genuine signed revocation of one rule, shown beside another.
  const genuine = signRuleRevoked(operatorKey, revocation("Bash(ls)", "dana", session, 3).revoked);
  const swapped: Revocation = { ...revocation("Bash(rm -rf *)", "dana", session, 3), revoked: genuine };
  const junk = ["not json {", JSON.stringify({ rule: hostile.rule, seq: 1 }), JSON.stringify({ ...forged, seq: -1 })];
  const entries = [
    JSON.stringify(hostile),
    junk[0]!,
    JSON.stringify(forged),
    junk[1]!,
    junk[2]!,
    JSON.stringify(swapped),
  ];
  await redis.lpush(revokedKey(prefix), ...entries);
  return { hostile, forged, swapped, malformed: junk.length };
}
