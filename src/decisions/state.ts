// Decision state folded from a session's log: a pure reducer (no I/O), for the projector and tools.
// A request still open when its attempt is abandoned, superseded by a newer attempt, or its turn
// ends is marked abandoned: nobody can answer it any more, and the retried attempt asks again.
// Like the hub, the state counts an operator's decision only when it is signed (and, given the trusted
// keys, only when the signature checks): anyone who can write Redis can append an unsigned one. A
// record the hub writes (a rule's verdict, a timeout, a shutdown) carries no signature: a rule's counts
// only when a signed rule it names accounts for it (given the keys), and a timeout's or shutdown's
// never decides (the request is shown pending until its attempt ends, then abandoned): a forged one
// changes nothing.
import type { Envelope } from "../log/index.ts";
import {
  decisionMadeData,
  decisionRequestedData,
  ruleAddedData,
  type DecisionMade,
  type DecisionRequested,
  type RuleAdded,
} from "../events/index.ts";
import type { OperatorKeyring } from "./operator-keys.ts";
import type { TrustRule } from "./rules.ts";
import { requestDigest, ruleOfAdded, verifyDecision, verifyRule } from "./signing.ts";

export interface RequestState {
  requestId: string;
  turn: string;
  attempt: number;
  epoch: number;
  seq: number;
  requested: DecisionRequested;
  status: "pending" | "decided" | "abandoned";
  made: DecisionMade | undefined;
}

export interface DecisionState {
  requests: Record<string, RequestState>;
  rules: RuleAdded[];
  lastSeq: number;
}

export const initialDecisionState = (): DecisionState => ({ requests: {}, rules: [], lastSeq: 0 });

const ENDS_TURN = new Set(["turn.finished", "turn.failed", "turn.cancelled"]);

/**
 * The operator keys, and the fleet's stored rules a rule's verdict may be accounted to beside those added in the log.
 */
export interface FoldTrust {
  keyring?: OperatorKeyring | undefined;
  rules?: readonly TrustRule[] | undefined;
}

/** Whether a signed rule (stored, or added in this log) with the record's effect accounts for a rule's verdict. */
function ruleAccountsFor(ev: Envelope, state: DecisionState, made: DecisionMade, trust: FoldTrust): boolean {
  const keyring = trust.keyring;
  if (keyring === undefined || made.ruleId === undefined) return false;
  const added = state.rules.filter((a) => a.ruleId === made.ruleId).map((a) => ruleOfAdded(ev.session, a));
  const candidates = [...(trust.rules ?? []).filter((rule) => rule.id === made.ruleId), ...added];
  return candidates.some((rule) => rule.effect === made.decision && verifyRule(keyring, rule).ok);
}

/** Whether the hub could have acted on `made` (signature checked only when the keys are given). */
function counts(
  ev: Envelope,
  state: DecisionState,
  request: RequestState,
  made: DecisionMade,
  trust: FoldTrust,
): boolean {
  const keyring = trust.keyring;
  if (made.source === "rule") return ruleAccountsFor(ev, state, made, trust);
  if (made.source !== "operator") return false;
  if (made.keyId === undefined || made.signature === undefined) return false;
  if (made.decision === "allow" && request.requested.redacted !== undefined && made.allowRedacted !== true)
    return false;
  return (
    keyring === undefined || verifyDecision(keyring, ev.session, made, requestDigest(ev.session, request.requested)).ok
  );
}

/** One event folded in; `trust`: the operator keys and stored rules (or, the older form, the keyring itself). */
export function reduceDecisions(
  state: DecisionState,
  ev: Envelope,
  trustOrKeyring?: FoldTrust | OperatorKeyring,
): DecisionState {
  const trust = trustOf(trustOrKeyring);
  const next: DecisionState = { requests: state.requests, rules: state.rules, lastSeq: ev.seq };
  const update = (pick: (request: RequestState) => boolean, status: RequestState["status"]): void => {
    let changed: Record<string, RequestState> | undefined;
    for (const [id, request] of Object.entries(state.requests)) {
      if (request.status === "pending" && pick(request)) {
        changed ??= { ...state.requests };
        changed[id] = { ...request, status };
      }
    }
    if (changed !== undefined) next.requests = changed;
  };
  if (ev.kind === "decision.requested") {
    const parsed = decisionRequestedData.safeParse(ev.data);
    if (parsed.success) {
      next.requests = {
        ...state.requests,
        [parsed.data.requestId]: {
          requestId: parsed.data.requestId,
          turn: ev.turn,
          attempt: ev.attempt,
          epoch: ev.epoch,
          seq: ev.seq,
          requested: parsed.data,
          status: "pending",
          made: undefined,
        },
      };
    }
  } else if (ev.kind === "decision.made") {
    const parsed = decisionMadeData.safeParse(ev.data);
    const request = parsed.success ? state.requests[parsed.data.requestId] : undefined;
    // The first decision wins; a later one (a second operator, a late answer) changes nothing.
    if (
      parsed.success &&
      request !== undefined &&
      request.made === undefined &&
      counts(ev, state, request, parsed.data, trust)
    ) {
      next.requests = { ...state.requests, [request.requestId]: { ...request, status: "decided", made: parsed.data } };
    }
  } else if (ev.kind === "rule.added") {
    const parsed = ruleAddedData.safeParse(ev.data);
    if (parsed.success) next.rules = [...state.rules, parsed.data];
  } else if (ev.kind === "attempt.abandoned") {
    update((r) => r.turn === ev.turn && r.attempt === ev.attempt, "abandoned");
  } else if (ev.kind === "attempt.started") {
    update((r) => r.epoch < ev.epoch, "abandoned");
  } else if (ENDS_TURN.has(ev.kind)) {
    update((r) => r.turn === ev.turn, "abandoned");
  }
  return next;
}

const isKeyring = (v: FoldTrust | OperatorKeyring): v is OperatorKeyring =>
  typeof (v as OperatorKeyring).has === "function";
const trustOf = (v: FoldTrust | OperatorKeyring | undefined): FoldTrust =>
  v === undefined ? {} : isKeyring(v) ? { keyring: v } : v;

export function foldDecisions(
  events: Iterable<Envelope>,
  state: DecisionState = initialDecisionState(),
  trustOrKeyring?: FoldTrust | OperatorKeyring,
): DecisionState {
  let folded = state;
  const trust = trustOf(trustOrKeyring);
  for (const ev of events) folded = reduceDecisions(folded, ev, trust);
  return folded;
}
