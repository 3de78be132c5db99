// Rows the SQL store derives from a copy's events for fleet questions (which tools ran, how long,
// who decided what). Pure: the events are the record, these rows are an index over them.
import { dataOf } from "../events/index.ts";
import type { Envelope } from "../log/index.ts";
import { foldMessages } from "../protocol/index.ts";

export interface ToolCallRow {
  turn: string;
  attempt: number;
  toolUseId: string;
  name: string;
  startedAt: string | null;
  /** When its result arrived; null when it never did (the run ended mid-tool). */
  endedAt: string | null;
  isError: boolean | null;
}

export interface DecisionRow {
  seq: number;
  requestId: string;
  turn: string;
  /** The tool the request named (decision.requested `tool`); null when the request is not in the log. */
  tool: string | null;
  decision: string;
  by: string;
  source: string;
  reason: string;
  at: string | null;
}

/** An envelope time as PostgreSQL takes it (ISO), or null when it is not a time. */
export function timestampOf(text: string | null): string | null {
  if (text === null) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

/** Every tool call of every attempt, paired with its result by the protocol's folding. */
export function toolCallRows(events: readonly Envelope[]): ToolCallRow[] {
  const attempts = new Map<string, { turn: string; attempt: number; raws: string[]; ats: string[] }>();
  for (const event of events) {
    if (event.kind !== "cli.line") continue;
    const key = `${event.attempt}\u0000${event.turn}`;
    let lines = attempts.get(key);
    if (lines === undefined) {
      lines = { turn: event.turn, attempt: event.attempt, raws: [], ats: [] };
      attempts.set(key, lines);
    }
    lines.raws.push((event.data as { raw: string }).raw);
    lines.ats.push(event.at);
  }
  const rows: ToolCallRow[] = [];
  for (const { turn, attempt, raws, ats } of attempts.values()) {
    for (const call of foldMessages(raws).toolCalls.values()) {
      const result = call.result;
      rows.push({
        turn,
        attempt,
        toolUseId: call.id,
        name: call.name,
        startedAt: timestampOf(ats[call.lineIndex] ?? null),
        endedAt: result === undefined ? null : timestampOf(ats[result.lineIndex] ?? null),
        isError: result === undefined ? null : result.isError,
      });
    }
  }
  return rows;
}

/**
 * Every decision.made, with the tool of the request it answers. An operator's decision counts only
 * signed, as in the read models: anyone who can write Redis can append an unsigned one.
 */
export function decisionRows(events: readonly Envelope[]): DecisionRow[] {
  const tools = new Map<string, string>();
  const rows: DecisionRow[] = [];
  for (const event of events) {
    if (event.kind === "decision.requested") {
      const data = dataOf("decision.requested", event.data);
      if (data !== undefined && !tools.has(data.requestId)) tools.set(data.requestId, data.tool);
      continue;
    }
    if (event.kind !== "decision.made") continue;
    const data = dataOf("decision.made", event.data);
    if (data === undefined) continue;
    if (data.source === "operator" && (data.keyId === undefined || data.signature === undefined)) continue;
    rows.push({
      seq: event.seq,
      requestId: data.requestId,
      turn: event.turn,
      tool: tools.get(data.requestId) ?? null,
      decision: data.decision,
      by: data.by,
      source: data.source,
      reason: data.reason,
      at: timestampOf(data.decidedAt) ?? timestampOf(event.at),
    });
  }
  return rows;
}
