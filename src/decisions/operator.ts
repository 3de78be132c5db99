// The operator side: decide a pending request (from any machine), optionally turning the decision
// into a fleet-wide trust rule. The log is the truth: the request is found in it, the decision is
// appended to it, and the first `decision.made` for a request is the one the hub acts on.
import type { Envelope, EventLog, RedisClient } from "../log/index.ts";
import { DecisionError } from "./errors.ts";
import { decisionMadeSchema, decisionRequestedSchema, type Decision, type DecisionMade, type DecisionRequested, type RuleAdded } from "./events.ts";
import { dropPending, getPending, isAbandoned } from "./pending.ts";
import { escapeGlob, parsePattern, ruleId, RuleStore, SUBJECT_TOOLS, type TrustRule } from "./rules.ts";

export interface DecideTarget {
  log: EventLog;
  /** Default: the log's Redis client. */
  redis?: RedisClient;
  /** Default: the log's prefix. */
  prefix?: string;
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
}

export interface DecideResult {
  /** The decision the hub acts on (yours, unless another operator was first). */
  decision: DecisionMade;
  applied: boolean;
  rule: TrustRule | undefined;
  seq: number;
}

interface FoundRequest {
  envelope: Envelope;
  data: DecisionRequested;
  decided: { envelope: Envelope; data: DecisionMade } | undefined;
}

async function findRequest(log: EventLog, session: string, requestId: string, fromSeq: number): Promise<FoundRequest | undefined> {
  let found: FoundRequest | undefined;
  for await (const ev of log.read(session, { fromSeq })) {
    if (found === undefined && ev.kind === "decision.requested") {
      const d = decisionRequestedSchema.safeParse(ev.data);
      if (d.success && d.data.requestId === requestId) found = { envelope: ev, data: d.data, decided: undefined };
    } else if (found !== undefined && ev.kind === "decision.made") {
      const d = decisionMadeSchema.safeParse(ev.data);
      if (d.success && d.data.requestId === requestId) return { ...found, decided: { envelope: ev, data: d.data } };
    }
  }
  return found;
}

export async function decide(target: DecideTarget, input: DecideInput): Promise<DecideResult> {
  const { log } = target;
  const redis = target.redis ?? log.redis;
  const prefix = target.prefix ?? log.prefix;
  const { session, requestId } = input;
  if (input.by.trim().length === 0) throw new Error("decide: `by` must name who decides");
  const hint = await getPending(redis, prefix, session, requestId);
  const found = await findRequest(log, session, requestId, hint?.seq ?? 1);
  if (found === undefined) {
    throw new DecisionError("not_found", session, requestId, `no decision request ${requestId} in session ${session}; list open ones with \`turnstream pending\``);
  }
  if (found.decided !== undefined) {
    await dropPending(redis, prefix, session, requestId);
    const d = found.decided.data;
    throw new DecisionError("already_decided", session, requestId, `request ${requestId} was already decided (${d.decision} by ${d.by})`);
  }
  if (Date.parse(found.data.expiresAt) <= Date.now()) {
    throw new DecisionError("expired", session, requestId, `request ${requestId} expired at ${found.data.expiresAt}; the hub denies it by itself`);
  }
  if (await isAbandoned(redis, prefix, { session, epoch: found.envelope.epoch, hubId: found.data.hubId })) {
    throw new DecisionError(
      "abandoned",
      session,
      requestId,
      `request ${requestId} belongs to an attempt whose worker is gone or was superseded; the retried attempt asks again`,
    );
  }
  const decidedAt = new Date().toISOString();
  let rule: TrustRule | undefined;
  const events: { turn: string; attempt: number; kind: string; data: unknown }[] = [];
  const turn = found.envelope.turn;
  const attempt = found.envelope.attempt;
  if (input.always === true) {
    let pattern = input.rule;
    if (pattern === undefined) {
      if (found.data.subject !== undefined) pattern = `${found.data.tool}(${escapeGlob(found.data.subject)})`;
      else if (!SUBJECT_TOOLS.has(found.data.tool)) pattern = found.data.tool;
      else {
        throw new DecisionError(
          "not_found",
          session,
          requestId,
          `request ${requestId} has no exact subject recorded (too long or scrubbed); give the rule's pattern with --rule`,
        );
      }
    }
    parsePattern(pattern);
    rule = {
      id: ruleId(input.decision, pattern),
      pattern,
      effect: input.decision,
      by: input.by,
      at: decidedAt,
      ...(input.reason !== undefined ? { reason: input.reason } : {}),
      source: { session, requestId },
    };
    const added: RuleAdded = {
      ruleId: rule.id,
      pattern,
      effect: rule.effect,
      by: input.by,
      ...(input.reason !== undefined ? { reason: input.reason } : {}),
      fromRequest: requestId,
      addedAt: decidedAt,
    };
    events.push({ turn, attempt, kind: "rule.added", data: added });
  }
  const made: DecisionMade = {
    requestId,
    decision: input.decision,
    by: input.by,
    source: "operator",
    reason: input.reason ?? "",
    decidedAt,
    ...(input.always === true ? { always: true } : {}),
    ...(rule !== undefined ? { ruleId: rule.id } : {}),
  };
  events.push({ turn, attempt, kind: "decision.made", data: made });
  // The record first (one atomic batch), then the rule store: a rule is never in force without its event.
  const res = await log.appendUnfenced(session, events);
  if (rule !== undefined) await new RuleStore(redis, prefix).put(rule);
  await dropPending(redis, prefix, session, requestId);
  const after = await findRequest(log, session, requestId, found.envelope.seq);
  const winner = after?.decided?.data ?? made;
  // Our decision.made is the last event of our batch; an earlier one for the request wins.
  const applied = after?.decided === undefined || after.decided.envelope.seq === res.lastSeq;
  return { decision: winner, applied, rule, seq: res.lastSeq };
}

export { listPending } from "./pending.ts";
