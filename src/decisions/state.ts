// Decision state folded from a session's log: a pure reducer (no I/O), for the projector and tools.
// A request still open when its attempt is abandoned, superseded by a newer attempt, or its turn
// ends is marked abandoned: nobody can answer it any more, and the retried attempt asks again.
import type { Envelope } from "../log/index.ts";
import { decisionMadeSchema, decisionRequestedSchema, ruleAddedSchema, type DecisionMade, type DecisionRequested, type RuleAdded } from "./events.ts";

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

export function reduceDecisions(state: DecisionState, ev: Envelope): DecisionState {
  const next: DecisionState = { requests: state.requests, rules: state.rules, lastSeq: ev.seq };
  const update = (pick: (r: RequestState) => boolean, status: RequestState["status"]): void => {
    let changed: Record<string, RequestState> | undefined;
    for (const [id, r] of Object.entries(state.requests)) {
      if (r.status === "pending" && pick(r)) {
        changed ??= { ...state.requests };
        changed[id] = { ...r, status };
      }
    }
    if (changed !== undefined) next.requests = changed;
  };
  if (ev.kind === "decision.requested") {
    const d = decisionRequestedSchema.safeParse(ev.data);
    if (d.success) {
      next.requests = {
        ...state.requests,
        [d.data.requestId]: { requestId: d.data.requestId, turn: ev.turn, attempt: ev.attempt, epoch: ev.epoch, seq: ev.seq, requested: d.data, status: "pending", made: undefined },
      };
    }
  } else if (ev.kind === "decision.made") {
    const d = decisionMadeSchema.safeParse(ev.data);
    const r = d.success ? state.requests[d.data.requestId] : undefined;
    // The first decision wins; a later one (a second operator, a late answer) changes nothing.
    if (d.success && r !== undefined && r.made === undefined) {
      next.requests = { ...state.requests, [r.requestId]: { ...r, status: "decided", made: d.data } };
    }
  } else if (ev.kind === "rule.added") {
    const d = ruleAddedSchema.safeParse(ev.data);
    if (d.success) next.rules = [...state.rules, d.data];
  } else if (ev.kind === "attempt.abandoned") {
    update((r) => r.turn === ev.turn && r.attempt === ev.attempt, "abandoned");
  } else if (ev.kind === "attempt.started") {
    update((r) => r.epoch < ev.epoch, "abandoned");
  } else if (ENDS_TURN.has(ev.kind)) {
    update((r) => r.turn === ev.turn, "abandoned");
  }
  return next;
}

export function foldDecisions(events: Iterable<Envelope>, state: DecisionState = initialDecisionState()): DecisionState {
  let s = state;
  for (const ev of events) s = reduceDecisions(s, ev);
  return s;
}
