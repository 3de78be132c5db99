// Revoking a trust rule. The rule leaves the fleet's rule hash, which the hub reads on every call it is
// asked about, so no call is decided by it from then on; and `rule.revoked` records who revoked it and
// why, as `rule.added` recorded its addition: in the log of the session whose decision added it, at the
// turn that added it (or in a session the operator names, for a rule whose own session is gone from
// Redis or that no decision added). The record comes first: a rule is never gone without its record.
// Then the rule joins the index of recent revocations (revoked-index.ts), which `rules list --revoked`
// and the dashboard show, since the rule hash no longer does.
// Revoking only takes trust away, so no operator key is needed; given one, the record is signed.
import { TurnstreamError } from "../kernel/index.ts";
import { LogRolledBackError, type EventLog, type RedisClient } from "../log/index.ts";
import { dataOf, type RuleRevoked } from "../events/index.ts";
import type { OperatorKey } from "./operator-keys.ts";
import { indexRevocation } from "./revoked-index.ts";
import { RuleStore, type TrustRule } from "./rules.ts";
import { signRuleRevoked } from "./signing.ts";

/**
 * not_found: no rule has that id or pattern; ambiguous: the pattern names more than one rule (an
 * allow and a deny); no_log: nowhere to record the revocation; forbidden: the Redis user may not write it.
 */
export type RevokeProblem = "not_found" | "ambiguous" | "no_log" | "forbidden";

export class RuleRevokeError extends TurnstreamError {
  readonly problem: RevokeProblem;
  constructor(problem: RevokeProblem, message: string) {
    super(message, { code: "rule_revoke" });
    this.problem = problem;
  }
}

export interface RevokeTarget {
  log: EventLog;
  /** Default: the log's Redis client. */
  redis?: RedisClient;
  /** Default: the log's prefix. */
  prefix?: string;
}

export interface RevokeInput {
  /** The rule's id (`rule-…`), or its exact pattern. */
  rule: string;
  /** `rule` is an id only, never a pattern: a button names the rule it was drawn for, nothing else. */
  idOnly?: boolean | undefined;
  /** Who revokes it (a person's name); recorded. */
  by: string;
  reason?: string | undefined;
  /** The session whose log records it; default the session whose decision added the rule. */
  session?: string | undefined;
  /** Signs the record (optional: revoking only takes trust away). */
  operatorKey?: OperatorKey | undefined;
}

export interface RevokeResult {
  rule: TrustRule;
  revoked: RuleRevoked;
  /** Where it was recorded. */
  session: string;
  seq: number;
  /** False when the rule was gone already (another operator revoked it in the meantime). */
  removed: boolean;
}

/** The one stored rule `ref` names: by id, else (unless `idOnly`) by exact pattern. */
function pickRule(rules: readonly TrustRule[], ref: string, idOnly: boolean): TrustRule {
  const byId = rules.find((rule) => rule.id === ref);
  if (byId !== undefined) return byId;
  const byPattern = idOnly ? [] : rules.filter((rule) => rule.pattern === ref);
  if (byPattern.length === 1) return byPattern[0]!;
  if (byPattern.length === 0)
    throw new RuleRevokeError(
      "not_found",
      `no trust rule has the ${idOnly ? "id" : "id or pattern"} ${JSON.stringify(ref.slice(0, 200))}; list them with \`turnstream rules list\``,
    );
  const ids = byPattern.map((rule) => `${rule.id} (${rule.effect})`).join(", ");
  throw new RuleRevokeError(
    "ambiguous",
    `pattern ${JSON.stringify(ref)} names ${byPattern.length} rules: ${ids}; revoke one by its id`,
  );
}

/** Where in `session`'s log the record goes: the turn that added the rule, else the session's last turn. */
async function recordPlace(
  log: EventLog,
  session: string,
  ruleId: string,
): Promise<{ turn: string; attempt: number; seenSeq: number }> {
  let place: { turn: string; attempt: number } | undefined;
  let last: { turn: string; seq: number } | undefined;
  for await (const event of log.read(session)) {
    last = { turn: event.turn, seq: event.seq };
    if (event.kind === "rule.added" && dataOf("rule.added", event.data)?.ruleId === ruleId)
      place = { turn: event.turn, attempt: event.attempt };
  }
  if (last === undefined)
    throw new RuleRevokeError(
      "no_log",
      `session ${session} is not in Redis (retention may have moved it): name a session to record the revocation in (--session S)`,
    );
  return { ...(place ?? { turn: last.turn, attempt: 0 }), seenSeq: last.seq };
}

/** The NOPERM Redis gave, itself or (a transaction's EXECABORT) for one of its commands. */
function noPermOf(err: unknown): Error | undefined {
  if (!(err instanceof Error)) return undefined;
  if (/^NOPERM/.test(err.message)) return err;
  const queued: unknown = Reflect.get(err, "previousErrors");
  return Array.isArray(queued) ? queued.map(noPermOf).find((found) => found !== undefined) : undefined;
}

/** Runs a write; a Redis NOPERM becomes a RuleRevokeError that says which role is needed to `what`. */
async function asOperator<T>(write: () => Promise<T>, what = "revoke rules"): Promise<T> {
  try {
    return await write();
  } catch (err) {
    const noPerm = noPermOf(err);
    if (noPerm === undefined) throw err;
    throw new RuleRevokeError(
      "forbidden",
      `this Redis user may not ${what} (Redis said: ${noPerm.message.slice(0, 200)}); ` +
        "connect as a user with the operator role (REDIS_URL=redis://operator:<password>@host:port; see deploy/redis-users.acl)",
    );
  }
}

/** The `rule.revoked` record: who, when and why, signed when a key is given. */
function revokedRecord(rule: TrustRule, input: RevokeInput): RuleRevoked {
  const unsigned = {
    ruleId: rule.id,
    pattern: rule.pattern,
    effect: rule.effect,
    by: input.by,
    reason: input.reason,
    revokedAt: new Date().toISOString(),
  };
  return input.operatorKey === undefined ? unsigned : signRuleRevoked(input.operatorKey, unsigned);
}

/**
 * Revokes a trust rule: records `rule.revoked`, then removes the rule from the store, so the hub stops
 * honouring it. Throws RuleRevokeError for a rule not found, a pattern naming two, or no log to record in.
 */
export async function revokeRule(target: RevokeTarget, input: RevokeInput): Promise<RevokeResult> {
  if (input.by.trim().length === 0) throw new Error("revokeRule: `by` must name who revokes");
  const prefix = target.prefix ?? target.log.prefix;
  const store = new RuleStore(target.redis ?? target.log.redis, prefix);
  const rule = pickRule(await store.list(), input.rule, input.idOnly === true);
  const session = input.session ?? rule.source?.session;
  if (session === undefined)
    throw new RuleRevokeError(
      "no_log",
      `rule ${rule.id} was not added by a decision in a session: name a session to record its revocation in (--session S)`,
    );
  const place = await recordPlace(target.log, session, rule.id);
  const revoked = revokedRecord(rule, input);
  const event = { turn: place.turn, attempt: place.attempt, kind: "rule.revoked", data: revoked };
  const appended = await asOperator(() => target.log.appendUnfenced(session, [event], { ackedSeq: place.seenSeq }));
  if (appended.outcome === "rolled_back") throw new LogRolledBackError(session, place.seenSeq, appended.lastSeq);
  const removed = await asOperator(() => store.remove(rule.id));
  const done = { rule, revoked, session, seq: appended.lastSeq, removed };
  // Indexed once, by the revocation that removed the rule: one that found it gone has its record only.
  if (removed) await asOperator(() => indexRevocation(store.redis, prefix, done), indexedWhat(done));
  return done;
}

/** What an operator without the index's permission is told: the revocation itself is done. */
const indexedWhat = (done: { rule: TrustRule; session: string; seq: number }): string =>
  `add to the index of recent revocations; rule ${done.rule.id} is revoked and recorded at seq ${done.seq} of session ${done.session}`;
