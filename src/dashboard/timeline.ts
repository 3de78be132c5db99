// A session's turns as waterfalls, from its events: each attempt (and which worker ran it), each model
// call through the gateway (with its time to first byte), each tool call (from the CLI's lines, paired
// with its result), each decision wait (requested → decided) and each stretch a turn spent parked.
// Names, statuses and error kinds only: no input, output or prompt text is sent.
import { toolCallRows } from "../archive/index.ts";
import { dataOf } from "../events/index.ts";
import { forTerminal } from "../kernel/index.ts";
import type { Envelope } from "../log/index.ts";
import { fold, type ProjectionState } from "../projector/index.ts";

export type Lane = "attempt" | "model" | "tool" | "decision" | "parked";

export interface TimelineSpan {
  lane: Lane;
  attempt: number;
  label: string;
  /**
   * running, finished, failed, abandoned, error, ok, allow, deny, waiting, parked, resumed; unanswered
   * for a call or request its attempt or turn ended before seeing the end of.
   */
  status: string;
  startMs: number;
  /** Null while it lasts (drawn up to the timeline's `nowMs`). */
  endMs: number | null;
  /** Model calls: time to the answer's first byte. */
  ttfbMs: number | null;
  detail: string | null;
}

export interface TimelineTurn {
  turn: string;
  status: string;
  startMs: number | null;
  endMs: number | null;
  spans: TimelineSpan[];
  /** Spans past MAX_SPANS_PER_TURN, left out (the earliest are kept). */
  dropped: number;
}

export interface Timeline {
  session: string;
  nowMs: number;
  turns: TimelineTurn[];
}

export const MAX_SPANS_PER_TURN = 1500;

const msOf = (iso: string | null | undefined): number | null => {
  if (iso === null || iso === undefined) return null;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms;
};

/** Text a log holds (a model's, a producer's, a Redis writer's), escaped as everywhere else. */
const shown = (text: string): string => forTerminal(text);

/** Each attempt as the read model folded it, with the worker its attempt.started named. */
function attemptSpans(state: ProjectionState, turnIndex: number, workers: Map<string, string>): TimelineSpan[] {
  const turn = state.view.turns[turnIndex]!;
  return turn.attempts.flatMap((attempt) => {
    const startMs = msOf(attempt.startedAt);
    if (startMs === null) return [];
    const worker = workers.get(`${turn.id}\u0000${attempt.attempt}`);
    return [
      {
        lane: "attempt" as const,
        attempt: attempt.attempt,
        label: `attempt ${attempt.attempt}${worker === undefined ? "" : ` · ${shown(worker)}`}`,
        status: attempt.status,
        startMs,
        endMs: msOf(attempt.endedAt),
        ttfbMs: null,
        detail: attempt.abandonReason === null ? null : shown(attempt.abandonReason),
      },
    ];
  });
}

function modelSpan(env: Envelope): TimelineSpan | undefined {
  const call = dataOf("model.call", env.data);
  const startMs = msOf(call?.startedAt);
  if (call === undefined || startMs === null) return undefined;
  const cost = call.costUsd === undefined ? "" : ` · $${call.costUsd.toFixed(4)}`;
  return {
    lane: "model",
    attempt: env.attempt,
    label: shown(`${call.model ?? "model"} ${call.path}`),
    status: call.status >= 400 ? "error" : "ok",
    startMs,
    endMs: startMs + call.durationMs,
    ttfbMs: call.ttfbMs ?? null,
    detail: shown(`${call.status}${call.answeredBy ? ` (${call.answeredBy})` : ""}${cost}`),
  };
}

/** Spans built from single events: model calls, decision waits, parked stretches. */
function eventSpans(events: readonly Envelope[]): {
  byTurn: Map<string, TimelineSpan[]>;
  workers: Map<string, string>;
} {
  const byTurn = new Map<string, TimelineSpan[]>();
  const add = (turn: string, span: TimelineSpan): void => {
    const list = byTurn.get(turn);
    if (list === undefined) byTurn.set(turn, [span]);
    else list.push(span);
  };
  const workers = new Map<string, string>();
  const requests = new Map<string, TimelineSpan>();
  const parked = new Map<string, TimelineSpan>();
  const unpark = (turn: string, atMs: number | null, status: string): void => {
    const span = parked.get(turn);
    if (span === undefined) return;
    span.endMs = atMs;
    span.status = status;
    parked.delete(turn);
  };
  for (const env of events) {
    const atMs = msOf(env.at);
    if (env.kind === "model.call") {
      const span = modelSpan(env);
      if (span !== undefined) add(env.turn, span);
    } else if (env.kind === "attempt.started") {
      const worker = dataOf("attempt.started", env.data)?.worker;
      if (worker !== undefined) workers.set(`${env.turn}\u0000${env.attempt}`, worker);
      unpark(env.turn, atMs, "resumed");
    } else if (env.kind === "decision.requested" && atMs !== null) {
      const request = dataOf("decision.requested", env.data);
      if (request === undefined || requests.has(request.requestId)) continue;
      const span: TimelineSpan = {
        lane: "decision",
        attempt: env.attempt,
        label: `decision · ${shown(request.tool)}`,
        status: "waiting",
        startMs: atMs,
        endMs: null,
        ttfbMs: null,
        detail: request.riskClass,
      };
      requests.set(request.requestId, span);
      add(env.turn, span);
    } else if (env.kind === "decision.made") {
      const made = dataOf("decision.made", env.data);
      const span = made === undefined ? undefined : requests.get(made.requestId);
      if (made === undefined || span === undefined || span.endMs !== null) continue;
      span.endMs = msOf(made.decidedAt) ?? atMs;
      span.status = made.decision;
      span.detail = shown(`${made.decision} by ${made.by} (${made.source})`);
    } else if (env.kind === "turn.parked" && atMs !== null) {
      const park = dataOf("turn.parked", env.data);
      const span: TimelineSpan = {
        lane: "parked",
        attempt: env.attempt,
        label: `parked · ${shown(park?.tool ?? "?")}`,
        status: "parked",
        startMs: atMs,
        endMs: null,
        ttfbMs: null,
        detail: park === undefined ? null : `park ${park.parks}, deadline ${shown(park.deadline)}`,
      };
      parked.set(env.turn, span);
      add(env.turn, span);
    } else if (env.kind === "turn.finished" || env.kind === "turn.failed" || env.kind === "turn.cancelled") {
      unpark(env.turn, atMs, env.kind.slice("turn.".length));
    }
  }
  return { byTurn, workers };
}

function toolSpans(events: readonly Envelope[]): Map<string, TimelineSpan[]> {
  const byTurn = new Map<string, TimelineSpan[]>();
  for (const call of toolCallRows(events)) {
    const startMs = msOf(call.startedAt);
    if (startMs === null) continue;
    const span: TimelineSpan = {
      lane: "tool",
      attempt: call.attempt,
      label: shown(call.name || "(unnamed)"),
      status: call.isError === null ? "running" : call.isError ? "error" : "ok",
      startMs,
      endMs: msOf(call.endedAt),
      ttfbMs: null,
      detail: null,
    };
    const list = byTurn.get(call.turn);
    if (list === undefined) byTurn.set(call.turn, [span]);
    else list.push(span);
  }
  return byTurn;
}

/**
 * Spans still open in a turn whose attempt or whole turn has ended (a tool call the run never saw the
 * end of, a request the turn ended before anyone answered) end there: they did not go on.
 */
function closeOpenSpans(spans: TimelineSpan[], turnEndMs: number | null): void {
  const attemptEnds = new Map(
    spans.filter((span) => span.lane === "attempt").map((span) => [span.attempt, span.endMs] as const),
  );
  for (const span of spans) {
    if (span.endMs !== null || span.lane === "attempt") continue;
    const endMs =
      span.lane === "tool" || span.lane === "model" ? (attemptEnds.get(span.attempt) ?? turnEndMs) : turnEndMs;
    if (endMs === null || endMs === undefined) continue;
    span.endMs = Math.max(endMs, span.startMs);
    span.status = "unanswered";
  }
}

/** The waterfall of each turn of a session, from its events in order. */
export function timelineOf(session: string, events: readonly Envelope[], nowMs = Date.now()): Timeline {
  const state = fold(events);
  const { byTurn, workers } = eventSpans(events);
  const tools = toolSpans(events);
  const turns = state.view.turns.map((turn, index): TimelineTurn => {
    const spans = [
      ...attemptSpans(state, index, workers),
      ...(byTurn.get(turn.id) ?? []),
      ...(tools.get(turn.id) ?? []),
    ];
    // Attempts first at a tie: each attempt heads the calls it made.
    const laneOrder = (span: TimelineSpan): number => (span.lane === "attempt" ? 0 : 1);
    spans.sort((a, b) => a.startMs - b.startMs || laneOrder(a) - laneOrder(b));
    closeOpenSpans(spans, msOf(turn.endedAt));
    return {
      turn: shown(turn.id),
      status: turn.status,
      startMs: msOf(turn.queuedAt) ?? spans[0]?.startMs ?? null,
      endMs: msOf(turn.endedAt),
      spans: spans.slice(0, MAX_SPANS_PER_TURN),
      dropped: Math.max(0, spans.length - MAX_SPANS_PER_TURN),
    };
  });
  return { session, nowMs, turns };
}
