// A logged turn as a re-run needs it: what was asked (prompt, cwd, model, permission mode), the CLI
// lines of the attempt the turn's ending names, and how it ended. Read from the event log alone.
import type { Envelope } from "../log/index.ts";
import { dataOf } from "../events/index.ts";
import { isObj, stringField, TurnstreamError } from "../kernel/index.ts";
import { parseLine } from "../protocol/index.ts";

export type TurnStatus = "finished" | "failed" | "cancelled" | "unended";

export interface TurnEnding {
  status: TurnStatus;
  errorKind: string | undefined;
  resultText: string | undefined;
}

/** One turn of a logged session, as recorded. */
export interface RecordedTurn {
  /** The turn's id in the log. */
  turn: string;
  prompt: string;
  cwd: string;
  model: string | undefined;
  /** The permission mode the CLI's init line reported (`default`, `bypassPermissions`…), if it printed one. */
  permissionMode: string | undefined;
  /** The CLI ran with permissions skipped (its init line said `bypassPermissions`). */
  skipPermissions: boolean;
  /** The attempt whose lines count: the one the turn's ending names, else the last that printed. */
  attempt: number;
  /** The raw `cli.line` texts of that attempt, in order. */
  lines: string[];
  ending: TurnEnding;
}

/** The session holds no turn the re-run can use (or none the `--turn` selector names). */
export class NoRecordedTurnError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "no_recorded_turn" });
  }
}

function endingOf(events: readonly Envelope[]): TurnEnding & { attempt: number | undefined } {
  for (const event of events) {
    if (event.kind === "turn.finished") {
      const finished = dataOf("turn.finished", event.data);
      return {
        status: "finished",
        errorKind: undefined,
        resultText: finished?.resultText,
        attempt: finished?.attempt ?? event.attempt,
      };
    }
    if (event.kind === "turn.failed") {
      const failed = dataOf("turn.failed", event.data);
      return {
        status: "failed",
        errorKind: failed?.errorKind,
        resultText: undefined,
        attempt: failed?.attempt ?? event.attempt,
      };
    }
    if (event.kind === "turn.cancelled")
      return { status: "cancelled", errorKind: "aborted", resultText: undefined, attempt: event.attempt || undefined };
  }
  return { status: "unended", errorKind: undefined, resultText: undefined, attempt: undefined };
}

/**
 * The permission mode of the attempt's init line. A recording is untrusted: this says what it asks
 * for, never what a re-run gets.
 */
function permissionModeOf(lines: readonly string[]): string | undefined {
  for (const raw of lines) {
    const parsed = parseLine(raw).line;
    if (!isObj(parsed)) continue;
    if (parsed?.["type"] === "system" && parsed["subtype"] === "init") return stringField(parsed, "permissionMode");
  }
  return undefined;
}

function recordedTurn(turn: string, events: readonly Envelope[]): RecordedTurn | undefined {
  const queued = dataOf("turn.queued", events.find((e) => e.kind === "turn.queued")?.data);
  if (queued === undefined) return undefined;
  const { attempt: named, ...ending } = endingOf(events);
  const printed = events.filter((e) => e.kind === "cli.line");
  const attempt = named ?? Math.max(0, ...printed.map((e) => e.attempt));
  const lines = printed
    .filter((e) => e.attempt === attempt)
    .map((e) => dataOf("cli.line", e.data)?.raw)
    .filter((r): r is string => r !== undefined);
  const permissionMode = permissionModeOf(lines);
  const skipPermissions = permissionMode === "bypassPermissions";
  const { prompt, cwd, model } = queued;
  return { turn, prompt, cwd, model, permissionMode, skipPermissions, attempt, lines, ending };
}

/**
 * The session's turns in log order, or only the one `turn` names: a turn id, or its 1-based number
 * in the session. Turns whose request was never logged are left out.
 */
export function recordedTurns(events: readonly Envelope[], turn?: string): RecordedTurn[] {
  const byTurn = new Map<string, Envelope[]>();
  for (const event of events) {
    if (event.turn === "") continue;
    const list = byTurn.get(event.turn);
    if (list === undefined) byTurn.set(event.turn, [event]);
    else list.push(event);
  }
  const all = [...byTurn].map(([id, evs]) => recordedTurn(id, evs)).filter((t): t is RecordedTurn => t !== undefined);
  if (turn === undefined) {
    if (all.length === 0) throw new NoRecordedTurnError("the session's log holds no queued turn to re-run");
    return all;
  }
  const picked = /^\d+$/.test(turn) ? all[Number(turn) - 1] : all.find((t) => t.turn === turn);
  if (picked === undefined)
    throw new NoRecordedTurnError(
      `the session has no turn ${turn} (it has ${all.length}: ${all.map((t, i) => `${i + 1} ${t.turn}`).join(", ")})`,
    );
  return [picked];
}
