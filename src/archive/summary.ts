// The summary row of a session, read off the projector's fold: the same reducer the live read models
// use, so an archived row and a live one agree on every figure.
import type { Envelope } from "../log/index.ts";
import { fold, sessionLabels, type DecisionOutcome, type ProjectionState } from "../projector/index.ts";
import type { ArchivedSummary } from "./archive.ts";

/** Decision words the sources use for letting a call run (the CLI's tool_result meta says accept). */
const ALLOWING = new Set(["allow", "accept"]);
const DENYING = new Set(["deny", "reject"]);

/** The summary of a session's events (folded from seq 1). */
export function summarize(session: string, events: Iterable<Envelope>): ArchivedSummary {
  return summaryOfState(session, fold(events));
}

/** The summary of a state the projector already folded (the live read model keeps one per session). */
export function summaryOfState(session: string, state: ProjectionState): ArchivedSummary {
  const view = state.view;
  return {
    session,
    status: view.status,
    turns: view.turns.length,
    attempts: view.turns.reduce((sum, turn) => sum + turn.attempts.length, 0),
    costUsd: view.costUsd,
    tokens: { ...view.tokens },
    model: view.model,
    cwd: view.cwd,
    labels: sessionLabels(view),
    tenant: view.tenant,
    firstAt: view.firstAt,
    lastAt: view.lastAt,
    lastSeq: state.lastSeq,
    errorKinds: errorKindsOf(state),
    decisions: decisionsOf(state),
    lastErrorKind: view.lastErrorKind,
  };
}

/** Turns that ended in an error kind, and attempts whose last classification was not ok. */
function errorKindsOf(state: ProjectionState): Record<string, number> {
  const counts: Record<string, number> = {};
  const count = (kind: string): void => {
    counts[kind] = (counts[kind] ?? 0) + 1;
  };
  for (const turn of state.view.turns) {
    if (turn.errorKind !== null && turn.errorKind !== "ok") count(turn.errorKind);
    for (const attempt of turn.attempts) if (attempt.errorKind !== "ok") count(attempt.errorKind);
  }
  return counts;
}

/**
 * One decision per tool call: several sources report the same call's permission (the hub, the CLI's
 * denial line, its tool_result meta), so outcomes are grouped by tool call and a call counts as
 * denied when any source denied it, else allowed when one allowed it. Pending: hub requests still waiting.
 */
function decisionsOf(state: ProjectionState): ArchivedSummary["decisions"] {
  const calls = new Map<string, DecisionOutcome[]>();
  for (const outcome of state.decisions.outcomes) {
    const key = outcome.toolUseId ?? `seq:${outcome.seq}`;
    const group = calls.get(key);
    if (group === undefined) calls.set(key, [outcome]);
    else group.push(outcome);
  }
  let allowed = 0;
  let denied = 0;
  for (const group of calls.values()) {
    if (group.some((outcome) => DENYING.has(outcome.decision ?? ""))) denied++;
    else if (group.some((outcome) => ALLOWING.has(outcome.decision ?? ""))) allowed++;
  }
  return { allowed, denied, pending: state.decisions.pending.length };
}
