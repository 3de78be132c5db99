// The reducer: envelope → state, for every read model at once. No I/O, no clock (times come from the
// envelopes), no randomness: folding the same log always gives the same state, which is what lets a
// live projection be checked against (and replaced by) a rebuild from zero.
//
// `applyEvent` updates the state in place for speed (a million-event rebuild must not copy the state
// per event); `reduceSession` is the copying form for callers that keep the old state.
//
// Event data is read through its kind's schema (`dataOf`, src/events): data that does not fit is
// counted in `carried.malformed` and read as absent, so the event still moves the turn it belongs to.
import { parsePattern } from "../decisions/index.ts";
import { costAdded, currentKind, dataOf, TURN_KINDS, type EventData, type EventKind } from "../events/index.ts";
import { isObj, numberField, objField, stringField, type Obj } from "../kernel/index.ts";
import type { Envelope } from "../log/index.ts";
import { classifyResult, parseLine, toolResultText, type ErrorKind } from "../protocol/index.ts";
import { contentBlocks, objOf } from "../protocol/index.ts";
import { isTenantName } from "../tenants/index.ts";
import {
  initialState,
  zeroTokens,
  type AttemptView,
  type DecisionOutcome,
  type DecisionSource,
  type ProjectionState,
  type Rule,
  type ToolResultView,
  type TranscriptAttempt,
  type TranscriptItem,
  type TurnStatus,
  type TurnView,
} from "./state.ts";

/** Tool results longer than this are cut in the read model (the log keeps every byte). */
export const MAX_RESULT_CHARS = 32_000;
const RECENT_CARRIED = 20;

/** The minimal envelope the reducer reads (a full Envelope fits). */
export type ReducibleEnvelope = Pick<
  Envelope,
  "seq" | "session" | "turn" | "attempt" | "epoch" | "at" | "kind" | "data"
>;

export { initialState };

/** Folds one event into a session's projection state: pure, and an event at or below the checkpoint changes nothing. */
export function reduceSession(state: ProjectionState, env: ReducibleEnvelope): ProjectionState {
  return applyEvent(structuredClone(state), env);
}

export function fold(envelopes: Iterable<ReducibleEnvelope>, state: ProjectionState = initialState()): ProjectionState {
  for (const event of envelopes) applyEvent(state, event);
  return state;
}

export async function foldAsync(
  envelopes: AsyncIterable<ReducibleEnvelope>,
  state: ProjectionState = initialState(),
): Promise<ProjectionState> {
  for await (const event of envelopes) applyEvent(state, event);
  return state;
}

const turnKinds = TURN_KINDS as ReadonlySet<string>;

/** Applies one envelope in place and returns the state. Envelopes at or below the checkpoint are ignored. */
export function applyEvent(state: ProjectionState, env: ReducibleEnvelope): ProjectionState {
  if (env.seq <= state.lastSeq) return state;
  if (env.seq !== state.lastSeq + 1) state.gaps += env.seq - state.lastSeq - 1;
  state.lastSeq = env.seq;
  state.events++;
  const view = state.view;
  if (view.id === null) view.id = env.session;
  if (view.firstAt === null) view.firstAt = env.at;
  view.lastAt = env.at;
  if (env.kind === "cli.line") cliLine(state, env);
  else if (turnKinds.has(env.kind)) turnEvent(state, env);
  else sessionEvent(state, env);
  return state;
}

/** The event's data as its kind's shape; undefined (and counted malformed) when it does not fit. */
function read<K extends EventKind>(state: ProjectionState, kind: K, data: unknown): EventData<K> | undefined {
  const parsed = dataOf(kind, data);
  if (parsed === undefined) state.carried.malformed[kind] = (state.carried.malformed[kind] ?? 0) + 1;
  return parsed;
}

/** Events outside a turn's run: snapshots, replaced CLI sessions, hub decisions, rules, and kinds not known here. */
function sessionEvent(state: ProjectionState, env: ReducibleEnvelope): void {
  switch (currentKind(env.kind)) {
    case "session.snapshot": {
      const data = read(state, "session.snapshot", env.data);
      state.view.snapshots++;
      if (data !== undefined) state.view.cliSessionId = data.cliSessionId;
      return;
    }
    case "session.replaced":
      read(state, "session.replaced", env.data);
      state.view.replays++;
      return;
    case "decision.requested":
      decisionRequested(state, env);
      return;
    case "decision.made":
      decisionMade(state, env);
      return;
    case "rule.added":
      state.decisions.rules.push(ruleView(env.seq, read(state, "rule.added", env.data)));
      return;
    default:
      carry(state, env.seq, env.kind, null);
      state.carried.kinds[env.kind] = (state.carried.kinds[env.kind] ?? 0) + 1;
  }
}

function carry(state: ProjectionState, seq: number, kind: string, type: string | null): void {
  const carried = state.carried;
  carried.total++;
  carried.recent.push({ seq, kind, type });
  if (carried.recent.length > RECENT_CARRIED) carried.recent.splice(0, carried.recent.length - RECENT_CARRIED);
}

// ---- turns and attempts ----------------------------------------------------------------------

function turnAt(state: ProjectionState, id: string): number {
  const index = state.cursor.turnIndex[id];
  if (index !== undefined) return index;
  const idx = state.view.turns.length;
  state.cursor.turnIndex[id] = idx;
  state.view.turns.push({
    id,
    status: "queued",
    queuedAt: null,
    startedAt: null,
    endedAt: null,
    acceptedAttempt: null,
    errorKind: null,
    error: null,
    labels: {},
    attempts: [],
  });
  state.transcript.turns.push({ turn: id, prompt: null, promptSeq: null, attempts: [], acceptedAttempt: null });
  return idx;
}

function findAttempt(turn: TurnView, attemptNumber: number): number {
  for (let index = turn.attempts.length - 1; index >= 0; index--)
    if (turn.attempts[index]!.attempt === attemptNumber) return index;
  return -1;
}

function attemptAt(state: ProjectionState, ti: number, attemptNumber: number, epoch: number, at: string): AttemptView {
  const turn = state.view.turns[ti]!;
  const index = findAttempt(turn, attemptNumber);
  if (index >= 0) return turn.attempts[index]!;
  const attempt: AttemptView = {
    attempt: attemptNumber,
    epoch,
    status: "running",
    startedAt: at,
    endedAt: null,
    abandonReason: null,
    exitCode: null,
    signal: null,
    cliSessionId: null,
    errorKind: "no_result",
    results: 0,
    costUsd: 0,
    tokens: zeroTokens(),
    lines: 0,
    stderrLines: 0,
    modelCalls: { calls: 0, errors: 0, tokens: zeroTokens(), costUsd: 0 },
  };
  const ta: TranscriptAttempt = { attempt: attemptNumber, abandoned: false, abandonReason: null, items: [] };
  // Keep attempts ordered by number even if a late event of an older attempt creates it.
  let pos = turn.attempts.length;
  while (pos > 0 && turn.attempts[pos - 1]!.attempt > attemptNumber) pos--;
  turn.attempts.splice(pos, 0, attempt);
  state.transcript.turns[ti]!.attempts.splice(pos, 0, ta);
  if (turn.status === "queued") turn.status = "running";
  if (turn.startedAt === null) turn.startedAt = at;
  refreshAccepted(state, ti);
  refreshStatus(state, ti);
  return attempt;
}

function transcriptAttempt(state: ProjectionState, ti: number, attemptNumber: number): TranscriptAttempt {
  const list = state.transcript.turns[ti]!.attempts;
  for (let index = list.length - 1; index >= 0; index--)
    if (list[index]!.attempt === attemptNumber) return list[index]!;
  throw new Error(`internal: transcript attempt ${attemptNumber} of turn #${ti} missing`);
}

const TERMINAL_TURN = new Set<TurnStatus>(["finished", "failed", "cancelled"]);

function refreshAccepted(state: ProjectionState, ti: number, explicit?: number): void {
  const turn = state.view.turns[ti]!;
  let accepted: number | null = null;
  if (explicit !== undefined) {
    const index = findAttempt(turn, explicit);
    if (index >= 0 && turn.attempts[index]!.status !== "abandoned") accepted = explicit;
  }
  if (accepted === null && explicit === undefined && TERMINAL_TURN.has(turn.status) && turn.acceptedAttempt !== null) {
    const index = findAttempt(turn, turn.acceptedAttempt);
    if (index >= 0 && turn.attempts[index]!.status !== "abandoned") accepted = turn.acceptedAttempt;
  }
  if (accepted === null) {
    for (let index = turn.attempts.length - 1; index >= 0; index--) {
      if (turn.attempts[index]!.status !== "abandoned") {
        accepted = turn.attempts[index]!.attempt;
        break;
      }
    }
  }
  turn.acceptedAttempt = accepted;
  state.transcript.turns[ti]!.acceptedAttempt = accepted;
}

// Session status: running if any turn runs, else parked if one is parked (the turns after it wait on
// it), else queued if any waits, else the latest turn's. Only turns not yet ended are scanned
// (cursor.active), so this stays O(1) for long sessions.
function refreshStatus(state: ProjectionState, ti?: number): void {
  const turns = state.view.turns;
  if (turns.length === 0) return;
  const active = state.cursor.active;
  if (ti !== undefined) {
    const at = active.indexOf(ti);
    const open = !TERMINAL_TURN.has(turns[ti]!.status);
    if (open && at < 0) active.push(ti);
    else if (!open && at >= 0) active.splice(at, 1);
  }
  let status: ProjectionState["view"]["status"] = turns[turns.length - 1]!.status;
  let queued = false;
  let parked = false;
  for (const index of active) {
    const st = turns[index]!.status;
    if (st === "running") {
      status = "running";
      queued = parked = false;
      break;
    }
    if (st === "queued") queued = true;
    if (st === "parked") parked = true;
  }
  if (parked) status = "parked";
  else if (queued && TERMINAL_TURN.has(status)) status = "queued";
  state.view.status = status;
}

function setError(state: ProjectionState, kind: ErrorKind | string | null, seq: number): void {
  if (kind === null || kind === "ok" || kind === "no_result") return;
  state.view.lastErrorKind = kind as ErrorKind;
  state.view.lastErrorSeq = seq;
}

function abandon(state: ProjectionState, ti: number, attemptNumber: number, reason: string): void {
  const turn = state.view.turns[ti]!;
  const index = findAttempt(turn, attemptNumber);
  if (index < 0) return;
  const attempt = turn.attempts[index]!;
  if (attempt.status === "abandoned") return;
  attempt.status = "abandoned";
  attempt.abandonReason = reason;
  const ta = transcriptAttempt(state, ti, attemptNumber);
  ta.abandoned = true;
  ta.abandonReason = reason;
  const key = `${ti}:${attemptNumber}`;
  for (const index of state.cursor.attemptOutcomes[key] ?? []) state.decisions.outcomes[index]!.abandoned = true;
  let changed = false;
  for (const index of state.cursor.attemptRequests[key] ?? []) {
    const request = state.decisions.requests[index]!;
    if (request.status === "pending") {
      request.status = "abandoned";
      changed = true;
    }
  }
  if (changed) rebuildPending(state);
  refreshAccepted(state, ti);
}

function rebuildPending(state: ProjectionState): void {
  state.decisions.pending = state.decisions.requests
    .filter((r) => r.status === "pending" || r.status === "parked")
    .map((r) => r.requestId);
}

/** Events of a turn's run (TURN_KINDS) other than its CLI lines. */
function turnEvent(state: ProjectionState, env: ReducibleEnvelope): void {
  const ti = turnAt(state, env.turn);
  switch (env.kind) {
    case "turn.queued":
      turnQueued(state, env, ti);
      return;
    case "attempt.started":
      attemptStarted(state, env, ti);
      return;
    case "cli.stderr":
      // Counted only: stderr may hold what the scrubber did not know to take out.
      read(state, "cli.stderr", env.data);
      attemptAt(state, ti, env.attempt, env.epoch, env.at).stderrLines++;
      return;
    case "cli.exit":
      cliExit(state, env, ti);
      return;
    case "model.call":
      modelCall(state, env, ti);
      return;
    case "attempt.abandoned":
      attemptAbandoned(state, env, ti);
      return;
    case "turn.finished":
      turnFinished(state, env, ti);
      return;
    case "turn.failed":
      turnFailed(state, env, ti);
      return;
    case "turn.cancelled":
      turnCancelled(state, env, ti);
      return;
    case "turn.parked":
      turnParked(state, env, ti);
      return;
  }
}

/**
 * The turn parked on a request: its attempt's run ended there (it stays in the conversation: the next
 * attempt resumes it), and the turn waits for a decision until attempt.started says it resumed.
 */
function turnParked(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const data = read(state, "turn.parked", env.data);
  const turn = state.view.turns[ti]!;
  const attempt = attemptAt(state, ti, data?.attempt ?? env.attempt, env.epoch, env.at);
  if (attempt.status !== "abandoned") attempt.status = "parked";
  if (attempt.endedAt === null) attempt.endedAt = env.at;
  const index = data === undefined ? undefined : state.cursor.requestIndex[data.requestId];
  const request = index === undefined ? undefined : state.decisions.requests[index];
  if (request?.status === "pending") {
    request.status = "parked";
    rebuildPending(state);
  }
  if (!TERMINAL_TURN.has(turn.status)) turn.status = "parked";
  refreshStatus(state, ti);
}

/** A turn that ended while parked (cancelled) leaves its request unanswered for good. */
function dropParkedRequests(state: ProjectionState, turn: string): void {
  let changed = false;
  for (const request of state.decisions.requests) {
    if (request.turn !== turn || request.status !== "parked") continue;
    request.status = "abandoned";
    changed = true;
  }
  if (changed) rebuildPending(state);
}

/** One call through the worker's gateway: counted on its attempt with its usage and estimated cost. */
function modelCall(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const data = read(state, "model.call", env.data);
  if (data === undefined) return;
  const calls = attemptAt(state, ti, env.attempt, env.epoch, env.at).modelCalls;
  calls.calls++;
  if (data.status >= 400) calls.errors++;
  if (data.costUsd !== undefined) calls.costUsd += data.costUsd;
  if (data.usage === undefined) return;
  calls.tokens.input += data.usage.input_tokens;
  calls.tokens.output += data.usage.output_tokens;
  calls.tokens.cacheRead += data.usage.cache_read_input_tokens;
  calls.tokens.cacheCreation += data.usage.cache_creation_input_tokens;
}

function turnQueued(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const data = read(state, "turn.queued", env.data);
  const turn = state.view.turns[ti]!;
  if (turn.queuedAt === null) turn.queuedAt = env.at;
  const tt = state.transcript.turns[ti]!;
  if (tt.prompt === null && data !== undefined) {
    tt.prompt = data.prompt;
    tt.promptSeq = env.seq;
  }
  if (data !== undefined && state.view.cwd === null) state.view.cwd = data.cwd;
  if (data?.model !== undefined && state.view.model === null) state.view.model = data.model;
  if (data?.labels !== undefined) turn.labels = { ...data.labels };
  // An imported log is anyone's text: only a tenant name counts as the session's tenant. (A state
  // folded before tenants were kept has no field: `?? null`.)
  if (data?.tenant !== undefined && (state.view.tenant ?? null) === null && isTenantName(data.tenant))
    state.view.tenant = data.tenant;
  refreshStatus(state, ti);
}

function attemptStarted(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const data = read(state, "attempt.started", env.data);
  const turn = state.view.turns[ti]!;
  // A later attempt of the same turn means the earlier ones will never write again (fenced).
  for (const attempt of turn.attempts) {
    if (attempt.attempt < env.attempt && (attempt.status === "running" || attempt.status === "exited"))
      abandon(state, ti, attempt.attempt, "superseded");
  }
  const current = attemptAt(state, ti, env.attempt, env.epoch, env.at);
  if (current.status !== "abandoned") current.status = "running";
  if (data?.cliVersion !== undefined) state.view.cliVersion = data.cliVersion;
  if (data !== undefined) state.view.cwd = data.cwd;
  if (data?.model !== undefined && state.view.model === null) state.view.model = data.model;
  // Where the attempt's CLI session's count starts: recorded when resuming, 0 for a fresh session; a
  // resumed attempt of a log from before it was recorded is left to its first result (attemptCost).
  const costBase = data === undefined ? undefined : (data.costBaseUsd ?? (data.resume === undefined ? 0 : undefined));
  if (costBase !== undefined) state.cursor.costBase[`${ti}:${env.attempt}`] = costBase;
  if (!TERMINAL_TURN.has(turn.status)) turn.status = "running";
  refreshAccepted(state, ti);
  refreshStatus(state, ti);
}

function cliExit(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const data = read(state, "cli.exit", env.data);
  const attempt = attemptAt(state, ti, env.attempt, env.epoch, env.at);
  attempt.exitCode = data?.code ?? null;
  attempt.signal = data?.signal ?? null;
  attempt.endedAt = env.at;
  if (attempt.status === "running") attempt.status = "exited";
}

function attemptAbandoned(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const data = read(state, "attempt.abandoned", env.data);
  // The data names the abandoned attempt: a later attempt may record an earlier one's death.
  const attemptNumber = data?.attempt ?? env.attempt;
  const attempt = attemptAt(state, ti, attemptNumber, env.epoch, env.at);
  if (attempt.endedAt === null) attempt.endedAt = env.at;
  abandon(state, ti, attemptNumber, data?.reason ?? "abandoned");
  refreshStatus(state, ti);
}

/** Ends the turn with attempt `n` (named by turn.finished/failed) as its outcome; returns that attempt's view. */
function endTurn(
  state: ProjectionState,
  env: ReducibleEnvelope,
  ti: number,
  status: "finished" | "failed",
  attemptNumber: number,
): AttemptView | undefined {
  const turn = state.view.turns[ti]!;
  turn.status = status;
  turn.endedAt = env.at;
  const index = findAttempt(turn, attemptNumber);
  const attempt = index >= 0 ? turn.attempts[index]! : undefined;
  if (attempt !== undefined && attempt.status !== "abandoned") {
    attempt.status = status;
    if (attempt.endedAt === null) attempt.endedAt = env.at;
  }
  refreshAccepted(state, ti, attemptNumber);
  return attempt;
}

function turnFinished(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const data = read(state, "turn.finished", env.data);
  const attempt = endTurn(state, env, ti, "finished", data?.attempt ?? env.attempt);
  const turn = state.view.turns[ti]!;
  turn.errorKind = attempt?.errorKind ?? null;
  setError(state, turn.errorKind, env.seq);
  if (data?.cliSessionId !== undefined) state.view.cliSessionId = data.cliSessionId;
  // The accepted attempt's last total is where its CLI session stands for the session's next turn.
  const total = attempt === undefined ? undefined : state.cursor.costTotal[`${ti}:${attempt.attempt}`];
  if (attempt !== undefined && attempt.cliSessionId !== null && total !== undefined)
    state.cursor.cliCostTotals[attempt.cliSessionId] = total;
  forgetCosts(state, ti);
  refreshStatus(state, ti);
}

/** Drops the per-attempt cost bookkeeping of an ended turn (what its next turn needs is in cliCostTotals). */
function forgetCosts(state: ProjectionState, ti: number): void {
  for (const attempt of state.view.turns[ti]!.attempts) {
    delete state.cursor.costBase[`${ti}:${attempt.attempt}`];
    delete state.cursor.costTotal[`${ti}:${attempt.attempt}`];
  }
}

function turnFailed(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const data = read(state, "turn.failed", env.data);
  const attempt = endTurn(state, env, ti, "failed", data?.attempt ?? env.attempt);
  const turn = state.view.turns[ti]!;
  turn.errorKind = (data?.errorKind as ErrorKind | undefined) ?? attempt?.errorKind ?? null;
  turn.error = data === undefined ? null : { name: data.error.name, message: data.error.message };
  setError(state, turn.errorKind ?? "cli_error", env.seq);
  forgetCosts(state, ti);
  refreshStatus(state, ti);
}

function turnCancelled(state: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  read(state, "turn.cancelled", env.data);
  const turn = state.view.turns[ti]!;
  if (turn.status === "parked") dropParkedRequests(state, turn.id);
  turn.status = "cancelled";
  turn.endedAt = env.at;
  forgetCosts(state, ti);
  refreshAccepted(state, ti);
  refreshStatus(state, ti);
}

// ---- CLI lines -------------------------------------------------------------------------------

function cliLine(state: ProjectionState, env: ReducibleEnvelope): void {
  const ti = turnAt(state, env.turn);
  const attempt = attemptAt(state, ti, env.attempt, env.epoch, env.at);
  attempt.lines++;
  const data = read(state, "cli.line", env.data);
  if (data === undefined) return;
  if (data.raw === "" && data.truncated !== undefined) {
    countLine(state, env.seq, "truncated");
    return;
  }
  const parsed = parseLine(data.raw);
  if (parsed.category === "invalid") {
    countLine(state, env.seq, "invalid");
    return;
  }
  if (parsed.category !== "known") countLine(state, env.seq, parsed.type);
  const outcome = objOf(parsed);
  if (outcome === undefined) return;
  const key = `${ti}:${attempt.attempt}`;
  const sid = stringField(outcome, "session_id");
  if (sid !== undefined && attempt.cliSessionId === null) attempt.cliSessionId = sid;
  switch (outcome["type"]) {
    case "assistant":
      assistant(state, env, ti, key, outcome);
      return;
    case "user":
      user(state, env, ti, key, outcome);
      return;
    case "result":
      result(state, env, attempt, key, outcome);
      return;
    case "system":
      system(state, env, ti, key, outcome);
      return;
  }
}

function countLine(state: ProjectionState, seq: number, type: string): void {
  state.carried.lineTypes[type] = (state.carried.lineTypes[type] ?? 0) + 1;
  carry(state, seq, "cli.line", type);
}

function toolPaths(state: ProjectionState, key: string): Record<string, number[]> {
  let toolPaths = state.cursor.toolPaths[key];
  if (toolPaths === undefined) {
    toolPaths = {};
    state.cursor.toolPaths[key] = toolPaths;
  }
  return toolPaths;
}

function itemAt(root: TranscriptItem[], path: number[]): TranscriptItem | undefined {
  let items = root;
  let item: TranscriptItem | undefined;
  for (let index = 0; index < path.length; index++) {
    item = items[path[index]!];
    if (item === undefined) return undefined;
    if (index < path.length - 1) {
      if (item.t !== "tool") return undefined;
      items = item.subagent;
    }
  }
  return item;
}

interface Group {
  items: TranscriptItem[];
  path: number[];
}

/** The item list lines with this parent_tool_use_id go to (the subagent list of that tool call). */
function groupFor(
  state: ProjectionState,
  env: ReducibleEnvelope,
  ti: number,
  key: string,
  parent: string | undefined,
): Group {
  const ta = transcriptAttempt(state, ti, env.attempt);
  if (parent === undefined) return { items: ta.items, path: [] };
  const paths = toolPaths(state, key);
  let path = paths[parent];
  let call = path === undefined ? undefined : itemAt(ta.items, path);
  if (call === undefined || call.t !== "tool") {
    // Subagent output whose spawning call we never saw: keep it under a placeholder call.
    call = { t: "tool", id: parent, name: "", input: null, seq: env.seq, result: null, subagent: [] };
    path = [ta.items.length];
    ta.items.push(call);
    paths[parent] = path;
  }
  return { items: call.subagent, path: path! };
}

function assistant(state: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, outcome: Obj): void {
  const parent = stringField(outcome, "parent_tool_use_id");
  const group = groupFor(state, env, ti, key, parent);
  const msg = objField(outcome, "message");
  const messageId = stringField(msg, "id") ?? null;
  const model = stringField(msg, "model");
  if (model !== undefined && model !== "<synthetic>" && parent === undefined) state.view.model = model;
  const error = stringField(outcome, "error");
  const blocks = contentBlocks(outcome);
  if (error !== undefined) {
    state.cursor.synthetic[key] = error;
    const text = blocks.map((b) => (typeof b["text"] === "string" ? b["text"] : "")).join("\n");
    group.items.push({ t: "api_error", error, text, seq: env.seq });
    return;
  }
  const paths = toolPaths(state, key);
  for (const block of blocks) {
    const type = block["type"];
    if (type === "text") {
      const text = typeof block["text"] === "string" ? block["text"] : "";
      if (text !== "") group.items.push({ t: "text", text, seq: env.seq, messageId });
    } else if (type === "tool_use") {
      const id = stringField(block, "id");
      if (id === undefined || paths[id] !== undefined) continue; // no id, or the same block printed twice
      paths[id] = [...group.path, group.items.length];
      group.items.push({
        t: "tool",
        id,
        name: typeof block["name"] === "string" ? block["name"] : "",
        input: block["input"] === undefined ? null : block["input"],
        seq: env.seq,
        result: null,
        subagent: [],
      });
    } else if (type === "thinking" || type === "redacted_thinking") {
      // Never part of the transcript.
    } else {
      countLine(state, env.seq, `assistant.block:${String(type)}`);
    }
  }
}

function resultView(content: unknown, isError: boolean, seq: number): ToolResultView {
  const full = toolResultText(content);
  const cut = full.length > MAX_RESULT_CHARS;
  return {
    text: cut ? full.slice(0, MAX_RESULT_CHARS) : full,
    isError,
    seq,
    droppedChars: cut ? full.length - MAX_RESULT_CHARS : 0,
  };
}

function user(state: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, line: Obj): void {
  const parent = stringField(line, "parent_tool_use_id");
  const blocks = contentBlocks(line);
  const ta = transcriptAttempt(state, ti, env.attempt);
  const paths = toolPaths(state, key);
  let results = 0;
  for (const block of blocks) if (block["type"] === "tool_result") results++;
  let group: Group | undefined;
  for (const block of blocks) {
    const type = block["type"];
    if (type === "tool_result") {
      const id = typeof block["tool_use_id"] === "string" ? block["tool_use_id"] : "";
      // `is_error` may be absent on success; a string tool_use_result means failure (measured).
      const isError = block["is_error"] === true || (results === 1 && typeof line["tool_use_result"] === "string");
      const view = resultView(block["content"], isError, env.seq);
      const path = paths[id];
      const call = path === undefined ? parkedCall(state, ti, env.attempt, id) : itemAt(ta.items, path);
      if (call !== undefined && call.t === "tool" && call.result === null) {
        call.result = view;
      } else {
        group ??= groupFor(state, env, ti, key, parent);
        group.items.push({ t: "orphan_result", toolUseId: id, result: view });
      }
    } else if (type === "text") {
      const text = typeof block["text"] === "string" ? block["text"] : "";
      if (text === "") continue;
      group ??= groupFor(state, env, ti, key, parent);
      group.items.push({ t: "user", text, seq: env.seq });
    }
  }
  const meta = line["tool_result_meta"];
  if (Array.isArray(meta)) {
    for (const calls of meta) {
      if (!isObj(calls)) continue;
      const pd = calls["permission_decision"];
      if (!isObj(pd)) continue;
      const id = stringField(calls, "id");
      outcome(state, env, `${key}|meta|${id ?? env.seq}`, {
        source: "tool_result_meta",
        toolUseId: id,
        toolName: toolNameOf(state, ti, env.attempt, key, id),
        decision: stringField(pd, "decision"),
        by: stringField(pd, "source"),
        reason: stringField(pd, "reason_type"),
      });
    }
  }
}

/**
 * The call `id` of a run of this turn that parked before `attempt`: the run that resumes it carries the
 * call's result (the deferred call runs, or is refused, only then), and the result belongs with it.
 */
function parkedCall(state: ProjectionState, ti: number, attempt: number, id: string): TranscriptItem | undefined {
  const attempts = state.view.turns[ti]!.attempts;
  for (let index = attempts.length - 1; index >= 0; index--) {
    const earlier = attempts[index]!;
    if (earlier.attempt >= attempt || earlier.status !== "parked") continue;
    const path = state.cursor.toolPaths[`${ti}:${earlier.attempt}`]?.[id];
    if (path !== undefined) return itemAt(transcriptAttempt(state, ti, earlier.attempt).items, path);
  }
  return undefined;
}

function toolNameOf(
  state: ProjectionState,
  ti: number,
  attempt: number,
  key: string,
  id: string | undefined,
): string | undefined {
  if (id === undefined) return undefined;
  const path = state.cursor.toolPaths[key]?.[id];
  const item =
    path === undefined ? parkedCall(state, ti, attempt, id) : itemAt(transcriptAttempt(state, ti, attempt).items, path);
  return item !== undefined && item.t === "tool" && item.name !== "" ? item.name : undefined;
}

function result(state: ProjectionState, env: ReducibleEnvelope, attempt: AttemptView, key: string, line: Obj): void {
  attempt.results++;
  const kind = classifyResult(line, state.cursor.synthetic[key]);
  delete state.cursor.synthetic[key];
  attempt.errorKind = kind;
  setError(state, kind, env.seq);
  const sid = stringField(line, "session_id");
  if (sid !== undefined) state.view.cliSessionId = sid;
  // total_cost_usd is the CLI session's running total (a run with background subagents prints two
  // results with the same figure; a resumed session goes on from its earlier turns), so the latest
  // replaces the attempt's total; usage is per result (measured: the second result of that run
  // reports its own smaller usage, each turn of a resumed session its own), so it adds up.
  const total = numberField(line, "total_cost_usd");
  if (total !== undefined) attemptCost(state, key, attempt, sid, total);
  const usage = objField(line, "usage");
  if (usage !== undefined) {
    for (const turn of [attempt.tokens, state.view.tokens]) {
      turn.input += numberField(usage, "input_tokens") ?? 0;
      turn.output += numberField(usage, "output_tokens") ?? 0;
      turn.cacheRead += numberField(usage, "cache_read_input_tokens") ?? 0;
      turn.cacheCreation += numberField(usage, "cache_creation_input_tokens") ?? 0;
    }
  }
  const denials = line["permission_denials"];
  if (Array.isArray(denials)) {
    const ti = state.cursor.turnIndex[env.turn]!;
    for (const data of denials) {
      if (!isObj(data)) continue;
      const id = stringField(data, "tool_use_id");
      outcome(state, env, `${key}|denial|${id ?? JSON.stringify(data)}`, {
        source: "permission_denials",
        toolUseId: id,
        toolName: stringField(data, "tool_name") ?? toolNameOf(state, ti, env.attempt, key, id),
        decision: "deny",
      });
    }
  }
}

/** Sets the attempt's cost from its latest running total: the rise over where its CLI session stood before it. */
function attemptCost(
  state: ProjectionState,
  key: string,
  attempt: AttemptView,
  cliSessionId: string | undefined,
  total: number,
): void {
  const carried = state.cursor;
  // Known from attempt.started, or else where the session's last finished turn left this CLI session (0 if new).
  const base = (carried.costBase[key] ??=
    (cliSessionId === undefined ? undefined : carried.cliCostTotals[cliSessionId]) ?? 0);
  carried.costTotal[key] = total;
  const cost = costAdded(base, total);
  state.view.costUsd += cost - attempt.costUsd;
  attempt.costUsd = cost;
}

function system(state: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, line: Obj): void {
  const sub = line["subtype"];
  if (sub === "init") {
    const turn = state.view.turns[ti]!;
    const attempt = turn.attempts[findAttempt(turn, env.attempt)]!;
    const sid = stringField(line, "session_id");
    if (sid !== undefined) {
      state.view.cliSessionId = sid;
      attempt.cliSessionId = sid;
    }
    const cwd = stringField(line, "cwd");
    if (cwd !== undefined) state.view.cwd = cwd;
    const model = stringField(line, "model");
    if (model !== undefined) state.view.model = model;
    const version = stringField(line, "claude_code_version");
    if (version !== undefined) state.view.cliVersion = version;
  } else if (sub === "permission_denied") {
    const id = stringField(line, "tool_use_id");
    outcome(state, env, `${key}|pd|${id ?? stringField(line, "uuid") ?? env.seq}`, {
      source: "permission_denied",
      toolUseId: id,
      toolName: stringField(line, "tool_name") ?? toolNameOf(state, ti, env.attempt, key, id),
      decision: "deny",
      by: stringField(line, "decision_reason_type"),
      reason: stringField(line, "decision_reason") ?? stringField(line, "message"),
    });
  } else if (sub === "hook_response") {
    outcome(state, env, `${key}|hook|${stringField(line, "hook_id") ?? stringField(line, "uuid") ?? env.seq}`, {
      source: "hook_response",
      toolUseId: stringField(line, "tool_use_id"),
      toolName: stringField(line, "tool_name"),
      decision: hookDecision(line),
      by: stringField(line, "hook_name") ?? stringField(line, "hook_event"),
      reason: stringField(line, "outcome"),
    });
  }
}

/** A PreToolUse hook's decision from its JSON output, or exit code 2 (= block). */
function hookDecision(outcome: Obj): string | undefined {
  for (const key of ["output", "stdout"]) {
    const text = outcome[key];
    if (typeof text !== "string" || !text.trimStart().startsWith("{")) continue;
    try {
      const json = JSON.parse(text) as unknown;
      if (!isObj(json)) continue;
      const hso = objField(json, "hookSpecificOutput");
      const data = stringField(hso, "permissionDecision") ?? stringField(json, "decision");
      if (data !== undefined) return data === "block" ? "deny" : data === "approve" ? "allow" : data;
    } catch {
      // not JSON: no decision in it
    }
  }
  return outcome["exit_code"] === 2 ? "deny" : undefined;
}

/** What a source reports of one permission outcome; absent fields are stored as null. */
interface OutcomeReport {
  source: DecisionSource;
  toolUseId: string | undefined;
  toolName: string | undefined;
  decision: string | undefined;
  by?: string | undefined;
  reason?: string | undefined;
  requestId?: string | undefined;
}

function outcome(
  state: ProjectionState,
  env: { seq: number; turn: string; attempt: number },
  dedupeKey: string,
  request: OutcomeReport,
): void {
  if (state.cursor.outcomeKeys[dedupeKey] !== undefined) return;
  state.cursor.outcomeKeys[dedupeKey] = env.seq;
  const ti = state.cursor.turnIndex[env.turn];
  if (ti !== undefined)
    (state.cursor.attemptOutcomes[`${ti}:${env.attempt}`] ??= []).push(state.decisions.outcomes.length);
  const outcome: DecisionOutcome = {
    seq: env.seq,
    turn: env.turn,
    attempt: env.attempt,
    abandoned: isAbandoned(state, env.turn, env.attempt),
    source: request.source,
    toolUseId: request.toolUseId ?? null,
    toolName: request.toolName ?? null,
    decision: request.decision ?? null,
    by: request.by ?? null,
    reason: request.reason ?? null,
    requestId: request.requestId ?? null,
  };
  state.decisions.outcomes.push(outcome);
}

/** Whether the attempt is known and abandoned (what it reports then does not count). */
function isAbandoned(state: ProjectionState, turn: string, attempt: number): boolean {
  const ti = state.cursor.turnIndex[turn];
  if (ti === undefined) return false;
  const turnView = state.view.turns[ti]!;
  const index = findAttempt(turnView, attempt);
  return index >= 0 && turnView.attempts[index]!.status === "abandoned";
}

// ---- hub decisions and rules -----------------------------------------------------------------

function decisionRequested(state: ProjectionState, env: ReducibleEnvelope): void {
  const data = read(state, "decision.requested", env.data);
  if (data === undefined || state.cursor.requestIndex[data.requestId] !== undefined) return;
  const ti = state.cursor.turnIndex[env.turn];
  const abandoned = isAbandoned(state, env.turn, env.attempt);
  state.cursor.requestIndex[data.requestId] = state.decisions.requests.length;
  if (ti !== undefined)
    (state.cursor.attemptRequests[`${ti}:${env.attempt}`] ??= []).push(state.decisions.requests.length);
  state.decisions.requests.push({
    requestId: data.requestId,
    seq: env.seq,
    turn: env.turn,
    attempt: env.attempt,
    toolName: data.tool,
    toolUseId: data.toolUseId ?? null,
    summary: data.input,
    deadline: data.expiresAt,
    status: abandoned ? "abandoned" : "pending",
    decision: null,
    by: null,
    decidedSeq: null,
  });
  if (!abandoned) state.decisions.pending.push(data.requestId);
}

function decisionMade(state: ProjectionState, env: ReducibleEnvelope): void {
  const data = read(state, "decision.made", env.data);
  if (data === undefined) return;
  // An operator's decision counts only signed: anyone who can write Redis can append an unsigned one
  // (the read model holds no keys to check a signature; the hub and `decide` do).
  if (data.source === "operator" && (data.keyId === undefined || data.signature === undefined)) return;
  const index = state.cursor.requestIndex[data.requestId];
  const request = index === undefined ? undefined : state.decisions.requests[index];
  if (request === undefined) state.decisions.unmatchedDecisions++;
  else if (request.decidedSeq !== null) return; // the first answer counts
  if (request !== undefined) {
    request.decision = data.decision;
    request.by = data.by;
    request.decidedSeq = env.seq;
    if (request.status === "pending" || request.status === "parked") {
      request.status = "decided";
      state.decisions.pending = state.decisions.pending.filter((id) => id !== request.requestId);
    }
  }
  const where = request ?? { turn: env.turn, attempt: env.attempt };
  outcome(state, { seq: env.seq, turn: where.turn, attempt: where.attempt }, `hub|${data.requestId}`, {
    source: "hub",
    toolUseId: request?.toolUseId ?? undefined,
    toolName: request?.toolName ?? undefined,
    decision: data.decision,
    by: data.by,
    reason: data.reason,
    requestId: data.requestId,
  });
}

/** A rule as the read model lists it: the effect is its decision, the tool the one its pattern names. */
function ruleView(seq: number, data: EventData<"rule.added"> | undefined): Rule {
  return {
    seq,
    ruleId: data?.ruleId ?? null,
    tool: data === undefined ? null : toolOfPattern(data.pattern),
    pattern: data?.pattern ?? null,
    decision: data?.effect ?? null,
    by: data?.by ?? null,
  };
}

/** The tool a rule pattern (`Tool` or `Tool(glob)`) names, or null when it is not one the hub would take. */
function toolOfPattern(pattern: string): string | null {
  try {
    return parsePattern(pattern).tool;
  } catch {
    return null;
  }
}
