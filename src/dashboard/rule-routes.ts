// The fleet's trust rules in the console, as `turnstream rules list` shows them, and revoking one as
// `turnstream rules revoke` does (the same revokeRule: the `rule.revoked` record in the log of the
// session whose decision added the rule, then the rule's removal). Revoking sits behind the decision
// guards (login, CSRF token, same origin, JSON), is recorded as the login's operator and signed with
// the dashboard's operator key; a console without a key is read-only here too. A rule's pattern comes
// from a tool call, so from the agent: every text is escaped like the command's, then scrubbed. Under
// the rules, the recent revocations as `turnstream rules list --revoked` shows them, from their index
// (which anyone who can write Redis can write: attacker input too).
import type { IncomingMessage, ServerResponse } from "node:http";
import { z as zod } from "zod";
import { forTerminal } from "../kernel/index.ts";
import {
  checkRule,
  readRevocations,
  revocationRow,
  revokeRule,
  RuleRevokeError,
  RuleStore,
  type RevocationRow,
  type RevokeProblem,
  type Revocation,
  type TrustRule,
} from "../decisions/index.ts";
import { isValidSessionId } from "../log/index.ts";
import { jsonBody, sendJson } from "./http.ts";
import type { Ctx } from "./routes.ts";

/** The ids `ruleId` makes; a rule written by hand under another id is revoked with the command. */
const RULE_ID = /^rule-[0-9a-f]{16}$/;

export interface RuleRow {
  id: string;
  effect: string;
  pattern: string;
  by: string;
  at: string;
  reason: string | null;
  /** The decision that added it; `linkable` when its session is a session id the console can open. */
  source: { session: string; requestId: string; linkable: boolean } | null;
  keyId: string | null;
  /** Against the dashboard's trusted keys: null when it has none (unchecked). */
  verified: boolean | null;
  why: string | null;
  /** Whether the console can name it back to revoke it (an id `ruleId` makes). */
  revocable: boolean;
}

/** A recent revocation, as `rules list --revoked --json` gives it, escaped. */
export interface RevokedRow extends RevocationRow {
  /** Whether its session is a session id the console can open (at the record). */
  linkable: boolean;
}

export interface RulesAnswer {
  /** Whether the dashboard has TURNSTREAM_OPERATOR_KEYS to check rules against. */
  checked: boolean;
  rules: RuleRow[];
  /** Newest first. */
  revoked: RevokedRow[];
  /** Entries of the revocations' index that are not revocations: not shown. */
  unreadableRevoked: number;
}

const line = (text: string): string => forTerminal(text);

function ruleRow(ctx: Ctx, rule: TrustRule): RuleRow {
  const check = checkRule(rule, ctx.trustedKeys);
  const source = rule.source;
  return {
    id: line(rule.id),
    effect: line(rule.effect),
    pattern: line(rule.pattern),
    by: line(rule.by),
    at: line(rule.at),
    reason: rule.reason === undefined || rule.reason === "" ? null : forTerminal(rule.reason, { multiline: true }),
    source:
      source === undefined
        ? null
        : {
            session: line(source.session),
            requestId: line(source.requestId),
            linkable: isValidSessionId(source.session),
          },
    keyId: rule.keyId === undefined ? null : line(rule.keyId),
    verified: check.verified,
    why: check.why ?? null,
    revocable: RULE_ID.test(rule.id),
  };
}

const orNull = (text: string | null): string | null => (text === null ? null : line(text));

function revokedRow(ctx: Ctx, revocation: Revocation): RevokedRow {
  const row = revocationRow(revocation, ctx.trustedKeys);
  return {
    ...row,
    ruleId: line(row.ruleId),
    effect: line(row.effect),
    pattern: line(row.pattern),
    addedBy: line(row.addedBy),
    revokedBy: line(row.revokedBy),
    revokedAt: line(row.revokedAt),
    reason: row.reason === null ? null : forTerminal(row.reason, { multiline: true }),
    keyId: orNull(row.keyId),
    // A why can quote a key id the entry names.
    why: orNull(row.why),
    session: line(row.session),
    linkable: isValidSessionId(row.session),
  };
}

/**
 * `GET /api/rules`: every trust rule, oldest first, with whether it verifies against the dashboard's
 * keys; and the recent revocations, newest first, with whether their records verify.
 */
export async function rulesRoute(ctx: Ctx, res: ServerResponse): Promise<void> {
  const rules = await new RuleStore(ctx.log.redis, ctx.log.prefix).list();
  const recent = await readRevocations(ctx.log.redis, ctx.log.prefix);
  const answer: RulesAnswer = {
    checked: ctx.trustedKeys !== undefined,
    rules: rules.map((rule) => ruleRow(ctx, rule)),
    revoked: recent.revocations.map((revocation) => revokedRow(ctx, revocation)),
    unreadableRevoked: recent.unreadable,
  };
  sendJson(res, 200, ctx.deep(answer));
}

const revokeBody = zod.strictObject({
  id: zod.string().regex(RULE_ID, "not a rule id"),
  reason: zod.string().max(2000).optional(),
});

/** The answer's status for each reason revokeRule gives. */
const PROBLEM_STATUS: Record<RevokeProblem, number> = {
  not_found: 404,
  ambiguous: 409,
  no_log: 409,
  forbidden: 403,
};

/** Why this request may not revoke (answered already with 403), or false when it may. */
function refused(ctx: Ctx, req: IncomingMessage, res: ServerResponse): boolean {
  const refusal =
    ctx.guard.refuseChange(req) ??
    (ctx.operatorKey === undefined
      ? "this dashboard is read-only: start it with TURNSTREAM_OPERATOR_KEY naming your operator key file to revoke rules"
      : undefined);
  if (refusal === undefined) return false;
  sendJson(res, 403, { error: refusal });
  return true;
}

/** `POST /api/rules/revoke`: `{ id, reason? }`; who revokes is the login's operator. */
export async function revokeRuleRoute(ctx: Ctx, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (refused(ctx, req, res)) return;
  const body = await jsonBody(req, res, revokeBody, "bad revocation", 8 * 1024);
  if (body === undefined) return;
  try {
    const done = await revokeRule(
      { log: ctx.log },
      { rule: body.id, idOnly: true, by: ctx.guard.operatorOf(req), reason: body.reason, operatorKey: ctx.operatorKey },
    );
    sendJson(
      res,
      200,
      ctx.deep({
        id: line(done.rule.id),
        effect: line(done.rule.effect),
        pattern: line(done.rule.pattern),
        by: line(done.revoked.by),
        keyId: done.revoked.keyId ?? null,
        removed: done.removed,
        session: line(done.session),
        seq: done.seq,
      }),
    );
  } catch (err) {
    if (!(err instanceof RuleRevokeError)) throw err;
    sendJson(res, PROBLEM_STATUS[err.problem], ctx.deep({ error: line(err.message), problem: err.problem }));
  }
}
