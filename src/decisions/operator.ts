// The operator side: decide a pending request (from any machine), optionally turning the decision
// into a fleet-wide trust rule. The log is the truth: the request is found in it, the decision is
// appended to it, and the first `decision.made` for a request the hub can verify is the one it acts on.
// Every decision and rule is signed with the operator's key (signing.ts): that, not access to Redis,
// is what lets the hub accept it.
import { userInfo } from "node:os";
import { LogRolledBackError, type Envelope, type EventLog, type RedisClient } from "../log/index.ts";
import { DecisionError } from "./errors.ts";
import {
  dataOf,
  decisionMadeData,
  decisionRequestedData,
  type Decision,
  type DecisionMade,
  type DecisionRequested,
} from "../events/index.ts";
import { parseOperatorKeys, type OperatorKey, type OperatorKeyring } from "./operator-keys.ts";
import { dropPending, getPending, isAbandoned, wakeParked, type PendingEntry } from "./pending.ts";
import { recordedCall } from "./parked.ts";
import {
  parsePattern,
  patternForSubject,
  ruleId,
  ruleMatches,
  RuleStore,
  SUBJECT_TOOLS,
  type TrustRule,
} from "./rules.ts";
import { requestDigest, ruleAddedOf, signDecision, signRule, verifyDecision, verifyRule } from "./signing.ts";

/**
 * Who a person at this machine is, as decisions and cancellations record them: TURNSTREAM_USER, then USER, then the
 * login name.
 */
export function operatorName(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const named = env["TURNSTREAM_USER"] || env["USER"];
  if (named) return named;
  try {
    return userInfo().username;
  } catch {
    return "unknown";
  }
}

export interface DecideTarget {
  log: EventLog;
  /** Default: the log's Redis client. */
  redis?: RedisClient;
  /** Default: the log's prefix. */
  prefix?: string;
  /** The operator's private key (loadOperatorKey): signs the decision and any rule. */
  operatorKey: OperatorKey;
  /**
   * The fleet's trusted public keys, when the operator has them (TURNSTREAM_OPERATOR_KEYS): an earlier
   * decision signed by a key outside them is not counted as the decision. Without them, only unsigned
   * or (by this operator's own key) badly signed decisions are passed over.
   */
  trustedKeys?: OperatorKeyring;
}

export interface DecideInput {
  session: string;
  requestId: string;
  decision: Decision;
  /** Who decides (a person's name); recorded. */
  by: string;
  reason?: string;
  /** Also add a trust rule so that matching calls are decided the same way from now on, fleet-wide. */
  always?: boolean;
  /** The rule's pattern with `always` (default: exactly this call, e.g. `Bash(git status)`). */
  rule?: string;
  /**
   * Allow a request whose shown input had secrets scrubbed out although the exact call is not shown
   * (recorded in decision.made). Without it such an allow is refused (DecisionError `redacted`).
   */
  allowRedacted?: boolean;
}

export interface DecideResult {
  /** The decision the hub acts on (yours, unless another operator was first). */
  decision: DecisionMade;
  applied: boolean;
  rule: TrustRule | undefined;
  seq: number;
  /** The request decided on, as recorded in the log. */
  request: DecisionRequested;
}

interface FoundRequest {
  envelope: Envelope;
  data: DecisionRequested;
  decided: { envelope: Envelope; data: DecisionMade } | undefined;
}

type Counts = (request: DecisionRequested, made: DecisionMade) => boolean;

/** The request and the first decision for it that `counts` (the one the hub would act on). */
async function findRequest(
  log: EventLog,
  session: string,
  requestId: string,
  fromSeq: number,
  counts: Counts,
): Promise<FoundRequest | undefined> {
  let found: FoundRequest | undefined;
  for await (const ev of log.read(session, { fromSeq })) {
    if (found === undefined && ev.kind === "decision.requested") {
      const parsed = decisionRequestedData.safeParse(ev.data);
      if (parsed.success && parsed.data.requestId === requestId)
        found = { envelope: ev, data: parsed.data, decided: undefined };
    } else if (found !== undefined && ev.kind === "decision.made") {
      const parsed = decisionMadeData.safeParse(ev.data);
      if (parsed.success && parsed.data.requestId === requestId && counts(found.data, parsed.data))
        return { ...found, decided: { envelope: ev, data: parsed.data } };
    }
  }
  return found;
}

/** The keyring that can check `keyId`: ours, else the trusted one; undefined when neither holds it. */
function ringOf(
  keyId: string,
  own: OperatorKeyring,
  trusted: OperatorKeyring | undefined,
): OperatorKeyring | undefined {
  return own.has(keyId) ? own : trusted?.has(keyId) === true ? trusted : undefined;
}

/**
 * Whether a rule-sourced record is one a signed trust rule accounts for: the rule it names is stored,
 * signed by a key we can check (or, without trusted keys, by any key), has the record's effect and
 * matches the recorded call.
 */
function ruleAccountsFor(
  request: DecisionRequested,
  made: DecisionMade,
  rules: readonly TrustRule[],
  own: OperatorKeyring,
  trusted: OperatorKeyring | undefined,
): boolean {
  const rule = rules.find((r) => r.id === made.ruleId);
  if (rule === undefined || rule.effect !== made.decision || rule.keyId === undefined) return false;
  const ring = ringOf(rule.keyId, own, trusted);
  if (ring === undefined ? trusted !== undefined : !verifyRule(ring, rule).ok) return false;
  const call = recordedCall(request);
  return ruleMatches(rule, { tool: call.tool_name, input: call.tool_input });
}

/**
 * Whether an earlier decision.made is one the hub acted on, as far as this operator can verify: an
 * operator's counts when signed by a key we can check (our own, or one of `trusted`), or by a key we
 * cannot check when we have no list of trusted keys; a rule's when a signed stored rule accounts for
 * it. A record claiming a timeout or the hub's shutdown is unsigned and proves nothing: whether the
 * request expired or its hub is gone is checked directly (checkDecidable), so a forged one written to
 * Redis neither drops nor answers a request.
 */
function countsFor(
  session: string,
  own: OperatorKeyring,
  trusted: OperatorKeyring | undefined,
  rules: readonly TrustRule[],
): Counts {
  return (request, made) => {
    if (made.source === "rule") return ruleAccountsFor(request, made, rules, own, trusted);
    if (made.source !== "operator") return false;
    if (made.keyId === undefined || made.signature === undefined) return false;
    if (made.decision === "allow" && request.redacted !== undefined && made.allowRedacted !== true) return false;
    const ring = ringOf(made.keyId, own, trusted);
    if (ring === undefined) return trusted === undefined;
    return verifyDecision(ring, session, made, requestDigest(session, request)).ok;
  };
}

const isNoPerm = (err: unknown): boolean => err instanceof Error && /^NOPERM/.test(err.message);

/** Runs a write; a Redis NOPERM becomes a DecisionError that says which role is needed. */
async function asOperator<T>(session: string, requestId: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (!isNoPerm(err)) throw err;
    throw new DecisionError(
      "forbidden",
      session,
      requestId,
      `this Redis user may not record decisions (Redis said: ${(err as Error).message.slice(0, 200)}); ` +
        "connect as a user with the operator role (REDIS_URL=redis://operator:<password>@host:port; see deploy/redis-users.acl)",
    );
  }
}

/**
 * An operator's signed allow or deny of a pending request (optionally a fleet-wide trust rule too); the first decision
 * recorded wins.
 */
export async function decide(target: DecideTarget, input: DecideInput): Promise<DecideResult> {
  const { log, operatorKey } = target;
  const redis = target.redis ?? log.redis;
  const prefix = target.prefix ?? log.prefix;
  const { session, requestId } = input;
  if (input.by.trim().length === 0) throw new Error("decide: `by` must name who decides");
  const rules = await new RuleStore(redis, prefix).list();
  const counts = countsFor(session, parseOperatorKeys([operatorKey.publicKey]), target.trustedKeys, rules);
  const hint = await getPending(redis, prefix, session, requestId);
  const found = await findRequest(log, session, requestId, hint?.seq ?? 1, counts);
  await checkDecidable(log, redis, prefix, input, found);
  const request = found!.data;
  const digest = requestDigest(session, request);
  const decidedAt = new Date().toISOString();
  const rule = input.always === true ? ruleFor(operatorKey, input, request, decidedAt) : undefined;
  const made = signDecision(operatorKey, session, {
    requestId,
    decision: input.decision,
    by: input.by,
    source: "operator",
    reason: input.reason ?? "",
    decidedAt,
    always: input.always === true ? true : undefined,
    ruleId: rule?.id,
    // Said only where it means something: the request's shown input was redacted.
    allowRedacted: input.allowRedacted === true && request.redacted !== undefined ? true : undefined,
    requestDigest: digest,
  });
  const { turn, attempt } = found!.envelope;
  const decisionEvent = { turn, attempt, kind: "decision.made", data: made };
  const events =
    rule === undefined
      ? [decisionEvent]
      : [{ turn, attempt, kind: "rule.added", data: ruleAddedOf(rule) }, decisionEvent];
  // The record first (one atomic batch), then the rule store: a rule is never in force without its event.
  // It claims the request it read: a log rolled back below it (a failover) refuses the decision.
  const ackedSeq = found!.envelope.seq;
  const res = await asOperator(session, requestId, () => log.appendUnfenced(session, events, { ackedSeq }));
  if (res.outcome === "rolled_back") throw new LogRolledBackError(session, ackedSeq, res.lastSeq);
  if (rule !== undefined) await asOperator(session, requestId, () => new RuleStore(redis, prefix).put(rule));
  // The decision is recorded; the index is a hint the hub also clears when it stops waiting. A parked
  // turn is woken at once (workers also find decided parked turns by themselves, later).
  if (request.parkable === true)
    await wakeParkedTurn({ log, redis, prefix }, hint, session, found!).catch(() => undefined);
  else await dropPending(redis, prefix, session, requestId).catch(() => undefined);
  const after = await findRequest(log, session, requestId, found!.envelope.seq, counts);
  const winner = after?.decided?.data ?? made;
  // Our decision.made is the last event of our batch; an earlier one for the request wins.
  const applied = after?.decided === undefined || after.decided.envelope.seq === res.lastSeq;
  return { decision: winner, applied, rule, seq: res.lastSeq, request };
}

/**
 * Wakes the turn parked on a decided request: its entry in the index names the queue, and when the
 * index lost the entry (a failover), the turn's `turn.parked` in the log does. A request whose turn
 * has not parked yet (decided in the moment before) needs no wake-up: the parking worker finds the decision.
 */
async function wakeParkedTurn(
  target: { log: EventLog; redis: RedisClient; prefix: string },
  entry: PendingEntry | undefined,
  session: string,
  found: FoundRequest,
): Promise<void> {
  const { log, redis, prefix } = target;
  const requestId = found.data.requestId;
  if (entry?.parked !== undefined) {
    await wakeParked(redis, prefix, { session, turn: entry.turn, queue: entry.parked.queue }, entry);
    return;
  }
  for await (const ev of log.read(session, { fromSeq: found.envelope.seq })) {
    const parked = ev.kind === "turn.parked" ? dataOf("turn.parked", ev.data) : undefined;
    if (parked?.requestId === requestId)
      await wakeParked(redis, prefix, { session, turn: ev.turn, queue: parked.queue }, entry);
  }
}

/** Throws the DecisionError that says why this request cannot be decided as asked, if any. */
async function checkDecidable(
  log: EventLog,
  redis: RedisClient,
  prefix: string,
  input: DecideInput,
  found: FoundRequest | undefined,
): Promise<void> {
  const { session, requestId } = input;
  if (found === undefined) {
    throw new DecisionError(
      "not_found",
      session,
      requestId,
      `no decision request ${requestId} in session ${session}; list open ones with \`turnstream pending\``,
    );
  }
  if (found.decided !== undefined) {
    // Best effort: a reader's stale index entry stays for the next operator to clear. A parked turn's
    // entry stays until it resumes, and the turn is woken again.
    const entry = found.data.parkable === true ? await getPending(redis, prefix, session, requestId) : undefined;
    const settle =
      found.data.parkable === true
        ? wakeParkedTurn({ log, redis, prefix }, entry, session, found)
        : dropPending(redis, prefix, session, requestId);
    await settle.catch(() => undefined);
    const earlier = found.decided.data;
    throw new DecisionError(
      "already_decided",
      session,
      requestId,
      `request ${requestId} was already decided (${earlier.decision} by ${earlier.by})`,
    );
  }
  if (Date.parse(found.data.expiresAt) <= Date.now()) {
    throw new DecisionError(
      "expired",
      session,
      requestId,
      `request ${requestId} expired at ${found.data.expiresAt}; the hub denies it by itself`,
    );
  }
  const parked = found.data.parkable === true ? await getPending(redis, prefix, session, requestId) : undefined;
  const entry = { session, epoch: found.envelope.epoch, hubId: found.data.hubId, parked: parked?.parked };
  if (await isAbandoned(redis, prefix, entry)) {
    throw new DecisionError(
      "abandoned",
      session,
      requestId,
      `request ${requestId} belongs to an attempt whose worker is gone or was superseded; the retried attempt asks again`,
    );
  }
  checkRedacted(input, found.data);
}

/** An operator must see what they allow: a redacted request needs an explicit allowRedacted. */
function checkRedacted(input: DecideInput, request: DecisionRequested): void {
  const redacted = request.redacted;
  if (redacted === undefined) return;
  const what = `request ${input.requestId} contains redacted text (${redacted.join(", ")}): the exact input is not shown`;
  if (input.always === true && input.rule === undefined) {
    throw new DecisionError(
      "redacted",
      input.session,
      input.requestId,
      `${what}, so no rule can be made from it; decide without --always, or give the rule's pattern yourself with --rule`,
    );
  }
  if (input.decision === "allow" && input.allowRedacted !== true) {
    throw new DecisionError(
      "redacted",
      input.session,
      input.requestId,
      `${what}, so allowing it would allow something you cannot see; deny it, or pass --allow-redacted (library: allowRedacted: true) if you know what it runs`,
    );
  }
}

/** The signed rule an `always` decision adds: the given pattern, or exactly this call. */
function ruleFor(key: OperatorKey, input: DecideInput, request: DecisionRequested, at: string): TrustRule {
  let pattern = input.rule;
  if (pattern === undefined) {
    if (request.subject !== undefined) pattern = patternForSubject(request.tool, request.subject);
    else if (!SUBJECT_TOOLS.has(request.tool)) pattern = request.tool;
    else {
      throw new DecisionError(
        "not_found",
        input.session,
        input.requestId,
        `request ${input.requestId} has no exact subject recorded (too long); give the rule's pattern with --rule`,
      );
    }
  }
  parsePattern(pattern);
  return signRule(key, {
    id: ruleId(input.decision, pattern),
    pattern,
    effect: input.decision,
    by: input.by,
    at,
    reason: input.reason,
    source: { session: input.session, requestId: input.requestId },
  });
}

export { listPending } from "./pending.ts";
