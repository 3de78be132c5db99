// Parked calls: a supervised call no rule or operator decided within the answer window is deferred,
// the CLI ends its run and the turn waits with nothing held. This file reads what the log says about
// such a call when its turn resumes: the recorded request, and the first decision for it that counts.
import {
  dataOf,
  decisionMadeData,
  decisionRequestedData,
  type DecisionMade,
  type DecisionRequested,
} from "../events/index.ts";
import type { EventLog } from "../log/index.ts";
import type { PendingEntry } from "./pending.ts";

/** The deferred call a turn parked on, as its `turn.parked` records it. */
export interface ParkedCall {
  requestId: string;
  /** The seq of its `decision.requested`. */
  requestSeq: number;
  tool: string;
  toolUseId: string;
  /** sha256 of the call's exact input (inputDigestOf). */
  inputDigest: string;
  /** When it is denied unless decided before (ISO). */
  deadline: string;
}

/** What a run's hook deferred: the call, and the pending-index entry an operator is shown for it. */
export interface DeferredCall {
  call: ParkedCall;
  /** Undefined when a resumed run deferred its parked call again (its entry is in the index already). */
  entry: PendingEntry | undefined;
}

/** The field of a call's input its recorded subject is, for rebuilding the call a rule decides on. */
const SUBJECT_FIELD: Readonly<Record<string, string>> = {
  Bash: "command",
  Monitor: "command",
  Write: "file_path",
  Edit: "file_path",
  MultiEdit: "file_path",
  Read: "file_path",
  NotebookEdit: "notebook_path",
  WebFetch: "url",
};

/** The call a recorded request names, as far as its subject tells (rules are matched against it). */
export function recordedCall(request: DecisionRequested): { tool_name: string; tool_input: Record<string, unknown> } {
  const field = SUBJECT_FIELD[request.tool];
  const input = field === undefined || request.subject === undefined ? {} : { [field]: request.subject };
  return { tool_name: request.tool, tool_input: input };
}

export interface ParkedRequest {
  requested: DecisionRequested;
  /** The first decision.made for it that `counts`. */
  decided: DecisionMade | undefined;
  /** An allow of it was handed to a CLI already (`decision.applied`): it is spent. */
  applied: boolean;
  /** The call as recorded (see recordedCall). */
  call: ReturnType<typeof recordedCall>;
}

/**
 * The parked call's request as the log holds it, with the first decision that `counts` and whether an
 * allow of it was used; undefined when the event at its seq is not a parkable request of `turn` for
 * exactly this call (tool-use id, input digest, deadline), which means the log does not say what the
 * turn parked on.
 */
export async function readParkedRequest(
  log: EventLog,
  session: string,
  turn: string,
  parked: ParkedCall,
  counts: (requested: DecisionRequested, made: DecisionMade) => boolean,
): Promise<ParkedRequest | undefined> {
  let found: ParkedRequest | undefined;
  for await (const ev of log.read(session, { fromSeq: parked.requestSeq })) {
    if (found === undefined) {
      const parsed = ev.kind === "decision.requested" ? decisionRequestedData.safeParse(ev.data) : undefined;
      if (parsed?.success !== true || ev.turn !== turn || !namesCall(parsed.data, parked)) return undefined;
      found = { requested: parsed.data, decided: undefined, applied: false, call: recordedCall(parsed.data) };
    } else if (ev.kind === "decision.applied") {
      if (dataOf("decision.applied", ev.data)?.requestId === parked.requestId) found.applied = true;
    } else if (ev.kind === "decision.made" && found.decided === undefined) {
      const made = decisionMadeData.safeParse(ev.data);
      if (made.success && made.data.requestId === parked.requestId && counts(found.requested, made.data))
        found.decided = made.data;
    }
  }
  return found;
}

function namesCall(requested: DecisionRequested, parked: ParkedCall): boolean {
  return (
    requested.requestId === parked.requestId &&
    requested.parkable === true &&
    requested.toolUseId === parked.toolUseId &&
    requested.inputDigest === parked.inputDigest &&
    requested.expiresAt === parked.deadline
  );
}
