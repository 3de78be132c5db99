// What an operator sees of a session next to a decision request: the turn's prompt and the last
// few things the agent said or did before asking.
import { forTerminal } from "../kernel/index.ts";
import type { ProjectionState, TranscriptItem } from "../projector/index.ts";

export interface RequestContext {
  prompt: string | null;
  recent: string[];
}

const cut = (text: string, n: number): string => (text.length > n ? `${text.slice(0, n)}…` : text);

function line(item: TranscriptItem): string {
  switch (item.t) {
    case "user":
      return `User: ${cut(item.text, 300)}`;
    case "text":
      return cut(item.text, 400);
    case "tool":
      return `${item.name}(${cut(JSON.stringify(item.input ?? {}), 200)})${item.result === null ? "" : ` → ${cut(item.result.text, 200)}`}`;
    case "orphan_result":
      return `→ ${cut(item.result.text, 200)}`;
    case "api_error":
      return `API error: ${item.error}`;
  }
}

export function contextOf(state: ProjectionState, turn: string): RequestContext | null {
  const ti = state.cursor.turnIndex[turn];
  if (ti === undefined) return null;
  const transcriptTurn = state.transcript.turns[ti]!;
  const attempt = transcriptTurn.attempts.at(-1);
  // The inbox shows this with textContent (no markup), but bidi and invisible characters still reorder
  // or hide text on a page: escaped like every text shown to a person.
  const shown = (text: string): string => forTerminal(text, { multiline: true });
  const recent = (attempt?.items ?? []).slice(-4).map((i) => forTerminal(line(i)));
  return { prompt: transcriptTurn.prompt === null ? null : shown(cut(transcriptTurn.prompt, 600)), recent };
}
