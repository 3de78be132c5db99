// The read models, as one JSON-serialisable state per session. Everything here is plain data (no
// Map, no undefined values, no class instances): it is stored in Redis as JSON and must compare
// equal after a round trip, so the live projection can be checked against a rebuild from zero.
import type { ErrorKind } from "../protocol/index.ts";

/** Bump when the state's shape or the reducer's semantics change: the projector rebuilds into new keys. */
export const STATE_VERSION = 6;

/** `parked`: waits for an operator's decision on a supervised call, holding nothing (turn.parked). */
export type TurnStatus = "queued" | "running" | "parked" | "finished" | "failed" | "cancelled";
export type SessionStatus = "new" | TurnStatus;
/**
 * `parked`: the run ended by parking the turn; it is part of the turn's conversation (the next
 * attempt resumes it), so a later attempt does not supersede it.
 */
export type AttemptStatus = "running" | "exited" | "parked" | "abandoned" | "finished" | "failed" | "cancelled";

export interface Tokens {
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
}

export interface AttemptView {
  attempt: number;
  epoch: number;
  status: AttemptStatus;
  startedAt: string | null;
  endedAt: string | null;
  /** Why it was abandoned (`attempt.abandoned` reason, or `superseded` when a later attempt began). */
  abandonReason: string | null;
  exitCode: number | null;
  signal: string | null;
  cliSessionId: string | null;
  /** Kind of its last `result` line (`no_result` until one arrives). */
  errorKind: ErrorKind;
  results: number;
  /** What the attempt cost: the rise of its CLI session's running total over where it stood before (costAdded). */
  costUsd: number;
  tokens: Tokens;
  lines: number;
  stderrLines: number;
  /** What the worker's model gateway saw of the attempt (`model.call` events). */
  modelCalls: ModelCallsView;
}

/** An attempt's model calls through the gateway: counted, their tokens and estimated cost summed. */
export interface ModelCallsView {
  calls: number;
  /** Calls answered with a status of 400 or more (refusals of the gateway included). */
  errors: number;
  tokens: Tokens;
  /** The gateway's estimate (its price table), beside the CLI's own `costUsd`. */
  costUsd: number;
}

export interface TurnView {
  id: string;
  status: TurnStatus;
  queuedAt: string | null;
  startedAt: string | null;
  endedAt: string | null;
  /** The attempt whose output counts: named by turn.finished/failed, else the latest not abandoned. */
  acceptedAttempt: number | null;
  errorKind: ErrorKind | null;
  /** turn.failed's error (name and message as the worker wrote them, already scrubbed). */
  error: { name: string | null; message: string | null } | null;
  /** The labels it was queued with (turn.queued). */
  labels: Record<string, string>;
  attempts: AttemptView[];
}

export interface SessionView {
  id: string | null;
  cliSessionId: string | null;
  cwd: string | null;
  model: string | null;
  cliVersion: string | null;
  /**
   * Whose session it is: the tenant its turns were queued for (turn.queued `tenant`), when that is a
   * tenant name. A session's first turn fixes it, so every turn of a producer's log names the same.
   */
  tenant: string | null;
  status: SessionStatus;
  turns: TurnView[];
  /** Spend over every attempt, abandoned ones included (their tokens were paid for). */
  costUsd: number;
  tokens: Tokens;
  /** The most recent non-ok classification of an attempt or turn, with the seq that set it. */
  lastErrorKind: ErrorKind | null;
  lastErrorSeq: number | null;
  snapshots: number;
  replays: number;
  firstAt: string | null;
  lastAt: string | null;
}

export interface ToolResultView {
  text: string;
  isError: boolean;
  seq: number;
  /** Characters dropped from `text` (the log has them all). */
  droppedChars: number;
}

export type TranscriptItem =
  | { t: "user"; text: string; seq: number }
  | { t: "text"; text: string; seq: number; messageId: string | null }
  | {
      t: "tool";
      id: string;
      name: string;
      input: unknown;
      seq: number;
      result: ToolResultView | null;
      /** Work of the subagent this call started (lines whose parent_tool_use_id is this id). */
      subagent: TranscriptItem[];
    }
  | { t: "orphan_result"; toolUseId: string; result: ToolResultView }
  | { t: "api_error"; error: string; text: string; seq: number };

export interface TranscriptAttempt {
  attempt: number;
  abandoned: boolean;
  abandonReason: string | null;
  items: TranscriptItem[];
}

export interface TranscriptTurn {
  turn: string;
  prompt: string | null;
  promptSeq: number | null;
  /** Every attempt in order; only the one named by `acceptedAttempt` belongs to the conversation. */
  attempts: TranscriptAttempt[];
  acceptedAttempt: number | null;
}

export interface Transcript {
  turns: TranscriptTurn[];
}

export type DecisionSource = "tool_result_meta" | "permission_denied" | "permission_denials" | "hook_response" | "hub";

/** One permission outcome, whoever reported it. */
export interface DecisionOutcome {
  seq: number;
  turn: string;
  attempt: number;
  source: DecisionSource;
  toolUseId: string | null;
  toolName: string | null;
  /** allow | deny | ask | … as reported; null when a hook response carried no decision. */
  decision: string | null;
  /** Who decided: the CLI's permission source, a hook name, the hub's `by`. */
  by: string | null;
  reason: string | null;
  requestId: string | null;
  /** The attempt this came from was abandoned. */
  abandoned: boolean;
}

/** `parked`: still waiting for an answer, its turn parked on it (turn.parked named it). */
export type RequestStatus = "pending" | "parked" | "decided" | "abandoned";

export interface DecisionRequest {
  requestId: string;
  seq: number;
  turn: string;
  attempt: number;
  /** decision.requested `tool`. */
  toolName: string | null;
  toolUseId: string | null;
  /** decision.requested `input`: the call as the operator is shown it (scrubbed, shortened). */
  summary: string | null;
  /** decision.requested `expiresAt`: when the hub stops waiting and denies. */
  deadline: string | null;
  status: RequestStatus;
  decision: string | null;
  by: string | null;
  decidedSeq: number | null;
}

/** A `rule.added` (fields null when its data did not fit the schema). */
export interface Rule {
  seq: number;
  ruleId: string | null;
  /** The tool the pattern names (`Bash` of `Bash(git *)`). */
  tool: string | null;
  /** As written: `Tool` or `Tool(glob)`. */
  pattern: string | null;
  /** The rule's effect: allow | deny. */
  decision: string | null;
  by: string | null;
}

export interface DecisionState {
  outcomes: DecisionOutcome[];
  /** Hub requests in request order. */
  requests: DecisionRequest[];
  /** Ids of requests still waiting for an answer (attempt alive, or its turn parked on it). */
  pending: string[];
  rules: Rule[];
  /** decision.made for a request id never seen. */
  unmatchedDecisions: number;
}

export interface Carried {
  /** Counts of event kinds the reducer does not know. */
  kinds: Record<string, number>;
  /** Counts of CLI line types without a schema, and lines that did not parse. */
  lineTypes: Record<string, number>;
  /** Known kinds whose data did not fit their schema (src/events); the reducer read it as absent. */
  malformed: Record<string, number>;
  /** The latest few unknown things, by seq (no payloads: the log has them). */
  recent: Array<{ seq: number; kind: string; type: string | null }>;
  total: number;
}

/** Bookkeeping the folding needs between events; part of the state so a stored state can continue. */
export interface Cursor {
  /** Per `<turnIndex>:<attempt>`: where each tool call sits (path of item indexes through subagents). */
  toolPaths: Record<string, Record<string, number[]>>;
  /** Per `<turnIndex>:<attempt>`: `error` of the last synthetic assistant line not yet classified. */
  synthetic: Record<string, string>;
  /** Turn id → index in view.turns and transcript.turns. */
  turnIndex: Record<string, number>;
  /** requestId → index in decisions.requests. */
  requestIndex: Record<string, number>;
  /** Dedupe keys of outcomes already recorded (permission_denials repeat on every result line). */
  outcomeKeys: Record<string, number>;
  /** Indexes of turns not yet finished, failed or cancelled. */
  active: number[];
  /** Per `<turnIndex>:<attempt>`: indexes into decisions.outcomes / decisions.requests (to mark them abandoned). */
  attemptOutcomes: Record<string, number[]>;
  attemptRequests: Record<string, number[]>;
  /**
   * Per `<turnIndex>:<attempt>` of turns not yet ended: the running total its CLI session stood at
   * before it (attempt.started `costBaseUsd`, else `cliCostTotals`), and the last total its results
   * reported. An attempt's cost is the rise (costAdded).
   */
  costBase: Record<string, number>;
  costTotal: Record<string, number>;
  /** CLI session id → the running total it had reported when its latest turn finished. */
  cliCostTotals: Record<string, number>;
}

export interface ProjectionState {
  v: typeof STATE_VERSION;
  /** Last applied seq: the checkpoint. Envelopes at or below it are ignored (re-deliveries). */
  lastSeq: number;
  events: number;
  /** Seq numbers skipped (a hole in what was delivered; never happens when reading the log in order). */
  gaps: number;
  view: SessionView;
  transcript: Transcript;
  decisions: DecisionState;
  carried: Carried;
  cursor: Cursor;
}

export const zeroTokens = (): Tokens => ({ input: 0, output: 0, cacheRead: 0, cacheCreation: 0 });

export function initialState(): ProjectionState {
  return {
    v: STATE_VERSION,
    lastSeq: 0,
    events: 0,
    gaps: 0,
    view: {
      id: null,
      cliSessionId: null,
      cwd: null,
      model: null,
      cliVersion: null,
      tenant: null,
      status: "new",
      turns: [],
      costUsd: 0,
      tokens: zeroTokens(),
      lastErrorKind: null,
      lastErrorSeq: null,
      snapshots: 0,
      replays: 0,
      firstAt: null,
      lastAt: null,
    },
    transcript: { turns: [] },
    decisions: { outcomes: [], requests: [], pending: [], rules: [], unmatchedDecisions: 0 },
    carried: { kinds: {}, lineTypes: {}, malformed: {}, recent: [], total: 0 },
    cursor: {
      toolPaths: {},
      synthetic: {},
      turnIndex: {},
      requestIndex: {},
      outcomeKeys: {},
      active: [],
      attemptOutcomes: {},
      attemptRequests: {},
      costBase: {},
      costTotal: {},
      cliCostTotals: {},
    },
  };
}

/** Short summary for listings (`turnstream sessions`), stored next to the state. */
export interface SessionSummary {
  id: string | null;
  status: SessionStatus;
  turns: number;
  costUsd: number;
  lastAt: string | null;
  lastSeq: number;
  lastErrorKind: ErrorKind | null;
  pendingDecisions: number;
  cliSessionId: string | null;
  tenant: string | null;
  /** The labels of its turns (sessionLabels). */
  labels: Record<string, string>;
}

export function summaryOf(state: ProjectionState): SessionSummary {
  return {
    id: state.view.id,
    status: state.view.status,
    turns: state.view.turns.length,
    costUsd: state.view.costUsd,
    lastAt: state.view.lastAt,
    lastSeq: state.lastSeq,
    lastErrorKind: state.view.lastErrorKind,
    pendingDecisions: state.decisions.pending.length,
    cliSessionId: state.view.cliSessionId,
    // A state of an earlier version (read before this one caught up) has no tenant field.
    tenant: state.view.tenant ?? null,
    labels: sessionLabels(state.view),
  };
}

/** A session's labels: its turns' labels, a later turn's value for a name replacing an earlier one's. */
export function sessionLabels(view: Pick<SessionView, "turns">): Record<string, string> {
  return Object.assign({}, ...view.turns.map((turn) => turn.labels)) as Record<string, string>;
}
