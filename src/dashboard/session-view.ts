// What the session page is sent: the read models of one session (without the fold's bookkeeping),
// the trace id of each turn, and after each live event a patch naming only what that event changed,
// so a long session's page does not receive its whole transcript again per line.
import { parseTraceParent } from "@opentelemetry/core";
import { traceIdsSchema } from "../events/index.ts";
import { isObj } from "../kernel/index.ts";
import type { Envelope } from "../log/index.ts";
import type { DecisionRequest, ProjectionState, TranscriptItem, TurnView } from "../projector/index.ts";

/** Turn id → trace id (from attempt.started's trace, else turn.queued's traceparent). */
export type TraceIds = Record<string, string>;

/**
 * Notes a turn's trace id. Only the field that carries it is checked, so a log imported from an older
 * version (its attempt.started without a later required field) still links its turns to their traces.
 */
export function noteTrace(traces: TraceIds, env: Envelope): void {
  if (env.turn === "" || !isObj(env.data)) return;
  if (env.kind === "attempt.started") {
    const id = traceIdsSchema.safeParse(env.data["trace"]).data?.traceId;
    if (id !== undefined) traces[env.turn] = id;
  } else if (env.kind === "turn.queued" && traces[env.turn] === undefined) {
    const traceparent = env.data["traceparent"];
    const id = typeof traceparent === "string" ? parseTraceParent(traceparent)?.traceId : undefined;
    if (id !== undefined) traces[env.turn] = id;
  }
}

export interface SessionPage {
  session: string;
  lastSeq: number;
  /** The log's last seq when this was computed (above lastSeq when viewing an earlier moment). */
  logSeq: number;
  view: ProjectionState["view"];
  transcript: ProjectionState["transcript"];
  requests: DecisionRequest[];
  rules: ProjectionState["decisions"]["rules"];
  traces: TraceIds;
  /** The trace UI link template (`{traceId}` replaced). */
  traceUrl: string;
  unknownEvents: number;
}

export function pageOf(
  session: string,
  state: ProjectionState,
  traces: TraceIds,
  logSeq: number,
  traceUrl: string,
): SessionPage {
  return {
    session,
    lastSeq: state.lastSeq,
    logSeq: Math.max(logSeq, state.lastSeq),
    view: state.view,
    transcript: state.transcript,
    requests: state.decisions.requests,
    rules: state.decisions.rules,
    traces,
    traceUrl,
    unknownEvents: state.carried.total,
  };
}

export interface ItemPatch {
  attempt: number;
  index: number;
  item: TranscriptItem;
}

export interface SessionPatch {
  seq: number;
  at: string;
  kind: string;
  view: Omit<ProjectionState["view"], "turns">;
  turnIndex: number | null;
  turnView: TurnView | null;
  head: {
    turn: string;
    prompt: string | null;
    promptSeq: number | null;
    acceptedAttempt: number | null;
    attempts: Array<{ attempt: number; abandoned: boolean; abandonReason: string | null; count: number }>;
  } | null;
  items: ItemPatch[];
  requests: DecisionRequest[];
  traceId: string | null;
}

function touches(item: TranscriptItem, seq: number): boolean {
  if (item.t === "orphan_result") return item.result.seq === seq;
  if (item.seq === seq) return true;
  if (item.t !== "tool") return false;
  return item.result?.seq === seq || item.subagent.some((sub) => touches(sub, seq));
}

/** Items per attempt already sent on this stream, keyed `<turnIndex>:<attemptIndex>`. */
export type SentCounts = Map<string, number>;

export function sentCountsOf(state: ProjectionState): SentCounts {
  const sent: SentCounts = new Map();
  state.transcript.turns.forEach((t, ti) => t.attempts.forEach((a, ai) => sent.set(`${ti}:${ai}`, a.items.length)));
  return sent;
}

/** The items of one attempt that `seq` added or changed (new ones, a call's result, subagent work). */
function changedItems(items: TranscriptItem[], attempt: number, from: number, seq: number): ItemPatch[] {
  const out: ItemPatch[] = [];
  for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
    if (itemIndex >= from || touches(items[itemIndex]!, seq))
      out.push({ attempt, index: itemIndex, item: items[itemIndex]! });
  }
  return out;
}

export function patchOf(state: ProjectionState, env: Envelope, sent: SentCounts, traces: TraceIds): SessionPatch {
  const { turns, ...view } = state.view;
  const ti = env.turn === "" ? undefined : state.cursor.turnIndex[env.turn];
  const base = { seq: env.seq, at: env.at, kind: env.kind, view, requests: [] as DecisionRequest[], traceId: null };
  if (ti === undefined) return { ...base, turnIndex: null, turnView: null, head: null, items: [] };
  const turn = state.transcript.turns[ti]!;
  const items: ItemPatch[] = [];
  turn.attempts.forEach((attempt, ai) => {
    const key = `${ti}:${ai}`;
    items.push(...changedItems(attempt.items, ai, sent.get(key) ?? 0, env.seq));
    sent.set(key, attempt.items.length);
  });
  const head = {
    turn: turn.turn,
    prompt: turn.prompt,
    promptSeq: turn.promptSeq,
    acceptedAttempt: turn.acceptedAttempt,
    attempts: turn.attempts.map((attempt) => ({
      attempt: attempt.attempt,
      abandoned: attempt.abandoned,
      abandonReason: attempt.abandonReason,
      count: attempt.items.length,
    })),
  };
  const requests = state.decisions.requests.filter((r) => r.turn === env.turn);
  return {
    ...base,
    turnIndex: ti,
    turnView: turns[ti] ?? null,
    head,
    items,
    requests,
    traceId: traces[env.turn] ?? null,
  };
}

/** Result text sent with a page; longer results are folded in the page and fetched whole when opened. */
export const SENT_RESULT_CHARS = 1500;

function trimItem(item: TranscriptItem): void {
  const result = item.t === "tool" ? item.result : item.t === "orphan_result" ? item.result : null;
  if (result !== null && result.text.length > SENT_RESULT_CHARS) {
    (result as typeof result & { more: number }).more = result.text.length - SENT_RESULT_CHARS;
    result.text = result.text.slice(0, SENT_RESULT_CHARS);
  }
  if (item.t === "tool") item.subagent.forEach(trimItem);
}

/**
 * Cuts long results short in an already scrubbed copy (scrub first: a secret cut in half would no
 * longer look like one), noting in `more` how many characters were left out.
 */
export function trimResults(items: readonly TranscriptItem[]): void {
  items.forEach(trimItem);
}

/** The result recorded by event `seq`, searched through the items (subagent work too). */
export function resultAt(items: readonly TranscriptItem[], seq: number): string | undefined {
  for (const item of items) {
    if ((item.t === "tool" || item.t === "orphan_result") && item.result?.seq === seq) return item.result.text;
    if (item.t === "tool") {
      const found = resultAt(item.subagent, seq);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
