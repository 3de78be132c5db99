// Signatures over decisions and trust rules. Each message is a JSON array of fixed fields in a fixed
// order behind a tag naming what it is, so the same bytes are signed and checked on every machine and a
// signature for one kind of thing can never be passed off as another.
//
// A decision is bound to its request by the request's digest: the hub compares it with the digest of
// the request *it* recorded, so a signature cannot be reused for another request, nor obtained by
// showing the operator a look-alike request planted in the log.
import { createHash } from "node:crypto";
import type { DecisionMade, DecisionRequested, RuleAdded, RuleRevoked } from "../events/index.ts";
import type { OperatorKey, OperatorKeyring } from "./operator-keys.ts";
import { ruleId, type TrustRule } from "./rules.ts";

const REQUEST_TAG = "turnstream.request.v1";
// A request that names its input's digest (every request since parking) is signed with it, so an
// allow covers exactly the input that will run when the parked call is re-asked.
const REQUEST_TAG_V2 = "turnstream.request.v2";
const DECISION_TAG = "turnstream.decision.v1";
const RULE_TAG = "turnstream.rule.v1";
const RULE_REVOKED_TAG = "turnstream.rule-revoked.v1";
/** What a worker's keyring is called in a verdict's why. */
const WORKER_KEYS = "this worker's operator keys";

export type Verification = { ok: true; keyId: string } | { ok: false; why: string };

/** The bytes signed for a record: its tag, its fields in their fixed order, and the signing key's id. */
function signedMessage(tag: string, fields: readonly unknown[], keyId: string): Buffer {
  return Buffer.from(JSON.stringify([tag, ...fields, keyId]));
}

/** Whether `signature` over `message` is by `keyId`, a key of `keyring` (`keys` names the keyring in the why). */
function signatureVerdict(
  keyring: OperatorKeyring,
  keyId: string,
  signature: string,
  message: Buffer,
  keys: string,
): Verification {
  if (!keyring.has(keyId)) return { ok: false, why: `its key ${keyId} is not one of ${keys}` };
  if (!keyring.verify(keyId, message, signature)) return { ok: false, why: "its signature does not match" };
  return { ok: true, keyId };
}

/** sha256 (hex) of a request as recorded in `decision.requested`, with its session. */
export function requestDigest(session: string, requested: DecisionRequested): string {
  const digested = requested.inputDigest !== undefined || requested.parkable === true;
  const fields: unknown[] = [
    digested ? REQUEST_TAG_V2 : REQUEST_TAG,
    session,
    requested.requestId,
    requested.nonce,
    requested.tool,
    requested.toolUseId ?? null,
    requested.riskClass,
    requested.input,
    requested.subject ?? null,
    requested.redacted ?? [],
    requested.cliSessionId ?? null,
    requested.hubId,
    requested.timeoutMs,
    requested.expiresAt,
  ];
  if (digested) fields.push(requested.inputDigest ?? null, requested.parkable === true);
  return createHash("sha256").update(JSON.stringify(fields)).digest("hex");
}

export type UnsignedDecision = Omit<DecisionMade, "keyId" | "signature">;

function decisionMessage(session: string, decision: UnsignedDecision, keyId: string): Buffer {
  const fields = [
    session,
    decision.requestId,
    decision.requestDigest ?? null,
    decision.decision,
    decision.by,
    decision.source,
    decision.reason,
    decision.decidedAt,
    decision.always === true,
    decision.ruleId ?? null,
    decision.allowRedacted === true,
  ];
  return signedMessage(DECISION_TAG, fields, keyId);
}

export function signDecision(key: OperatorKey, session: string, decision: UnsignedDecision): DecisionMade {
  return { ...decision, keyId: key.keyId, signature: key.sign(decisionMessage(session, decision, key.keyId)) };
}

/**
 * Whether the hub may act on `made` for the request whose digest is `digest`: an operator decision,
 * signed by a trusted key, for exactly that request.
 */
export function verifyDecision(
  keyring: OperatorKeyring,
  session: string,
  made: DecisionMade,
  digest: string,
): Verification {
  if (made.source !== "operator")
    return { ok: false, why: `it claims source "${made.source}", which only the hub itself records` };
  if (made.keyId === undefined || made.signature === undefined) return { ok: false, why: "it is not signed" };
  if (made.requestDigest !== digest) return { ok: false, why: "it was signed for a different request" };
  const message = decisionMessage(session, made, made.keyId);
  return signatureVerdict(keyring, made.keyId, made.signature, message, WORKER_KEYS);
}

export type UnsignedRule = Omit<TrustRule, "keyId" | "signature">;

function ruleMessage(rule: UnsignedRule, keyId: string): Buffer {
  const fields = [
    rule.id,
    rule.pattern,
    rule.effect,
    rule.by,
    rule.at,
    rule.reason ?? null,
    rule.source?.session ?? null,
    rule.source?.requestId ?? null,
  ];
  return signedMessage(RULE_TAG, fields, keyId);
}

export function signRule(key: OperatorKey, rule: UnsignedRule): TrustRule {
  return { ...rule, keyId: key.keyId, signature: key.sign(ruleMessage(rule, key.keyId)) };
}

/** A stored rule counts only when a trusted key signed it and its id is the one its effect and pattern give. */
export function verifyRule(keyring: OperatorKeyring, rule: TrustRule): Verification {
  if (rule.keyId === undefined || rule.signature === undefined) return { ok: false, why: "it is not signed" };
  if (rule.id !== ruleId(rule.effect, rule.pattern))
    return { ok: false, why: "its id does not match its effect and pattern" };
  return signatureVerdict(keyring, rule.keyId, rule.signature, ruleMessage(rule, rule.keyId), WORKER_KEYS);
}

/** Whether a stored rule verifies against the trusted keys: true, false (with why), or null when none are given. */
export interface RuleCheck {
  verified: boolean | null;
  why?: string | undefined;
}

/** A verification as shown to an operator: unchecked (null) without trusted keys. */
function shownCheck(
  trusted: OperatorKeyring | undefined,
  verify: (keyring: OperatorKeyring) => Verification,
): RuleCheck {
  if (trusted === undefined) return { verified: null };
  const verification = verify(trusted);
  return verification.ok ? { verified: true } : { verified: false, why: verification.why };
}

/** A rule's signature checked as the hub checks it, for showing an operator (`rules list`, the dashboard). */
export function checkRule(rule: TrustRule, trusted: OperatorKeyring | undefined): RuleCheck {
  return shownCheck(trusted, (keyring) => verifyRule(keyring, rule));
}

/** The `rule.added` record of a signed rule (it carries the rule's own signature). */
export function ruleAddedOf(rule: TrustRule): RuleAdded {
  return {
    ruleId: rule.id,
    pattern: rule.pattern,
    effect: rule.effect,
    by: rule.by,
    reason: rule.reason,
    fromRequest: rule.source?.requestId,
    addedAt: rule.at,
    keyId: rule.keyId,
    signature: rule.signature,
  };
}

/** The rule a `rule.added` event in `session`'s log describes, to verify it like a stored rule. */
export function ruleOfAdded(session: string, added: RuleAdded): TrustRule {
  return {
    id: added.ruleId,
    pattern: added.pattern,
    effect: added.effect,
    by: added.by,
    at: added.addedAt,
    reason: added.reason,
    source: added.fromRequest === undefined ? undefined : { session, requestId: added.fromRequest },
    keyId: added.keyId,
    signature: added.signature,
  };
}

export type UnsignedRuleRevoked = Omit<RuleRevoked, "keyId" | "signature">;

function ruleRevokedMessage(revoked: UnsignedRuleRevoked, keyId: string): Buffer {
  const fields = [
    revoked.ruleId,
    revoked.pattern,
    revoked.effect,
    revoked.by,
    revoked.reason ?? null,
    revoked.revokedAt,
  ];
  return signedMessage(RULE_REVOKED_TAG, fields, keyId);
}

/** A `rule.revoked` record signed by the operator who revoked the rule. */
export function signRuleRevoked(key: OperatorKey, revoked: UnsignedRuleRevoked): RuleRevoked {
  return { ...revoked, keyId: key.keyId, signature: key.sign(ruleRevokedMessage(revoked, key.keyId)) };
}

/** Whether a `rule.revoked` record was signed, as it reads, by a key of `keyring`. */
export function verifyRuleRevoked(keyring: OperatorKeyring, revoked: RuleRevoked): Verification {
  if (revoked.keyId === undefined || revoked.signature === undefined) return { ok: false, why: "it is not signed" };
  const message = ruleRevokedMessage(revoked, revoked.keyId);
  return signatureVerdict(keyring, revoked.keyId, revoked.signature, message, "the trusted keys");
}

/** A `rule.revoked` record's signature checked against the trusted keys, for showing an operator (as checkRule). */
export function checkRuleRevoked(revoked: RuleRevoked, trusted: OperatorKeyring | undefined): RuleCheck {
  return shownCheck(trusted, (keyring) => verifyRuleRevoked(keyring, revoked));
}
