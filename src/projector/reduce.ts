// The reducer: envelope → state, for every read model at once. No I/O, no clock (times come from the
// envelopes), no randomness: folding the same log always gives the same state, which is what lets a
// live projection be checked against (and replaced by) a rebuild from zero.
//
// `applyEvent` updates the state in place for speed (a million-event rebuild must not copy the state
// per event); `reduceSession` is the copying form for callers that keep the old state.
//
// Event data is read through its kind's schema (`dataOf`, src/events): data that does not fit is
// counted in `carried.malformed` and read as absent, so the event still moves the turn it belongs to.
import { parsePattern } from "../decisions/rules.ts";
import { costAdded, currentKind, dataOf, TURN_KINDS, type EventData, type EventKind } from "../events/index.ts";
import { isObj, numberField, objField, stringField, type Obj } from "../kernel/index.ts";
import type { Envelope } from "../log/index.ts";
import { classifyResult, parseLine, toolResultText, type ErrorKind } from "../protocol/index.ts";
import { contentBlocks, objOf } from "../protocol/lines.ts";
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
  for (const e of envelopes) applyEvent(state, e);
  return state;
}

export async function foldAsync(
  envelopes: AsyncIterable<ReducibleEnvelope>,
  state: ProjectionState = initialState(),
): Promise<ProjectionState> {
  for await (const e of envelopes) applyEvent(state, e);
  return state;
}

const turnKinds = TURN_KINDS as ReadonlySet<string>;

/** Applies one envelope in place and returns the state. Envelopes at or below the checkpoint are ignored. */
export function applyEvent(s: ProjectionState, env: ReducibleEnvelope): ProjectionState {
  if (env.seq <= s.lastSeq) return s;
  if (env.seq !== s.lastSeq + 1) s.gaps += env.seq - s.lastSeq - 1;
  s.lastSeq = env.seq;
  s.events++;
  const v = s.view;
  if (v.id === null) v.id = env.session;
  if (v.firstAt === null) v.firstAt = env.at;
  v.lastAt = env.at;
  if (env.kind === "cli.line") cliLine(s, env);
  else if (turnKinds.has(env.kind)) turnEvent(s, env);
  else sessionEvent(s, env);
  return s;
}

/** The event's data as its kind's shape; undefined (and counted malformed) when it does not fit. */
function read<K extends EventKind>(s: ProjectionState, kind: K, data: unknown): EventData<K> | undefined {
  const d = dataOf(kind, data);
  if (d === undefined) s.carried.malformed[kind] = (s.carried.malformed[kind] ?? 0) + 1;
  return d;
}

/** Events outside a turn's run: snapshots, replaced CLI sessions, hub decisions, rules, and kinds not known here. */
function sessionEvent(s: ProjectionState, env: ReducibleEnvelope): void {
  switch (currentKind(env.kind)) {
    case "session.snapshot": {
      const d = read(s, "session.snapshot", env.data);
      s.view.snapshots++;
      if (d !== undefined) s.view.cliSessionId = d.cliSessionId;
      return;
    }
    case "session.replaced":
      read(s, "session.replaced", env.data);
      s.view.replays++;
      return;
    case "decision.requested":
      decisionRequested(s, env);
      return;
    case "decision.made":
      decisionMade(s, env);
      return;
    case "rule.added":
      s.decisions.rules.push(ruleView(env.seq, read(s, "rule.added", env.data)));
      return;
    default:
      carry(s, env.seq, env.kind, null);
      s.carried.kinds[env.kind] = (s.carried.kinds[env.kind] ?? 0) + 1;
  }
}

function carry(s: ProjectionState, seq: number, kind: string, type: string | null): void {
  const c = s.carried;
  c.total++;
  c.recent.push({ seq, kind, type });
  if (c.recent.length > RECENT_CARRIED) c.recent.splice(0, c.recent.length - RECENT_CARRIED);
}

// ---- turns and attempts ----------------------------------------------------------------------

function turnAt(s: ProjectionState, id: string): number {
  const i = s.cursor.turnIndex[id];
  if (i !== undefined) return i;
  const idx = s.view.turns.length;
  s.cursor.turnIndex[id] = idx;
  s.view.turns.push({
    id,
    status: "queued",
    queuedAt: null,
    startedAt: null,
    endedAt: null,
    acceptedAttempt: null,
    errorKind: null,
    error: null,
    attempts: [],
  });
  s.transcript.turns.push({ turn: id, prompt: null, promptSeq: null, attempts: [], acceptedAttempt: null });
  return idx;
}

function findAttempt(t: TurnView, n: number): number {
  for (let i = t.attempts.length - 1; i >= 0; i--) if (t.attempts[i]!.attempt === n) return i;
  return -1;
}

function attemptAt(s: ProjectionState, ti: number, n: number, epoch: number, at: string): AttemptView {
  const t = s.view.turns[ti]!;
  const i = findAttempt(t, n);
  if (i >= 0) return t.attempts[i]!;
  const a: AttemptView = {
    attempt: n,
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
  const ta: TranscriptAttempt = { attempt: n, abandoned: false, abandonReason: null, items: [] };
  // Keep attempts ordered by number even if a late event of an older attempt creates it.
  let pos = t.attempts.length;
  while (pos > 0 && t.attempts[pos - 1]!.attempt > n) pos--;
  t.attempts.splice(pos, 0, a);
  s.transcript.turns[ti]!.attempts.splice(pos, 0, ta);
  if (t.status === "queued") t.status = "running";
  if (t.startedAt === null) t.startedAt = at;
  refreshAccepted(s, ti);
  refreshStatus(s, ti);
  return a;
}

function transcriptAttempt(s: ProjectionState, ti: number, n: number): TranscriptAttempt {
  const list = s.transcript.turns[ti]!.attempts;
  for (let i = list.length - 1; i >= 0; i--) if (list[i]!.attempt === n) return list[i]!;
  throw new Error(`internal: transcript attempt ${n} of turn #${ti} missing`);
}

const TERMINAL_TURN = new Set<TurnStatus>(["finished", "failed", "cancelled"]);

function refreshAccepted(s: ProjectionState, ti: number, explicit?: number): void {
  const t = s.view.turns[ti]!;
  let accepted: number | null = null;
  if (explicit !== undefined) {
    const i = findAttempt(t, explicit);
    if (i >= 0 && t.attempts[i]!.status !== "abandoned") accepted = explicit;
  }
  if (accepted === null && explicit === undefined && TERMINAL_TURN.has(t.status) && t.acceptedAttempt !== null) {
    const i = findAttempt(t, t.acceptedAttempt);
    if (i >= 0 && t.attempts[i]!.status !== "abandoned") accepted = t.acceptedAttempt;
  }
  if (accepted === null) {
    for (let i = t.attempts.length - 1; i >= 0; i--) {
      if (t.attempts[i]!.status !== "abandoned") {
        accepted = t.attempts[i]!.attempt;
        break;
      }
    }
  }
  t.acceptedAttempt = accepted;
  s.transcript.turns[ti]!.acceptedAttempt = accepted;
}

// Session status: running if any turn runs, else queued if any waits, else the latest turn's.
// Only turns not yet ended are scanned (cursor.active), so this stays O(1) for long sessions.
function refreshStatus(s: ProjectionState, ti?: number): void {
  const turns = s.view.turns;
  if (turns.length === 0) return;
  const active = s.cursor.active;
  if (ti !== undefined) {
    const at = active.indexOf(ti);
    const open = !TERMINAL_TURN.has(turns[ti]!.status);
    if (open && at < 0) active.push(ti);
    else if (!open && at >= 0) active.splice(at, 1);
  }
  let status: ProjectionState["view"]["status"] = turns[turns.length - 1]!.status;
  let queued = false;
  for (const i of active) {
    const st = turns[i]!.status;
    if (st === "running") {
      status = "running";
      queued = false;
      break;
    }
    if (st === "queued") queued = true;
  }
  if (queued && TERMINAL_TURN.has(status)) status = "queued";
  s.view.status = status;
}

function setError(s: ProjectionState, kind: ErrorKind | string | null, seq: number): void {
  if (kind === null || kind === "ok" || kind === "no_result") return;
  s.view.lastErrorKind = kind as ErrorKind;
  s.view.lastErrorSeq = seq;
}

function abandon(s: ProjectionState, ti: number, n: number, reason: string): void {
  const t = s.view.turns[ti]!;
  const i = findAttempt(t, n);
  if (i < 0) return;
  const a = t.attempts[i]!;
  if (a.status === "abandoned") return;
  a.status = "abandoned";
  a.abandonReason = reason;
  const ta = transcriptAttempt(s, ti, n);
  ta.abandoned = true;
  ta.abandonReason = reason;
  const key = `${ti}:${n}`;
  for (const i of s.cursor.attemptOutcomes[key] ?? []) s.decisions.outcomes[i]!.abandoned = true;
  let changed = false;
  for (const i of s.cursor.attemptRequests[key] ?? []) {
    const r = s.decisions.requests[i]!;
    if (r.status === "pending") {
      r.status = "abandoned";
      changed = true;
    }
  }
  if (changed) rebuildPending(s);
  refreshAccepted(s, ti);
}

function rebuildPending(s: ProjectionState): void {
  s.decisions.pending = s.decisions.requests.filter((r) => r.status === "pending").map((r) => r.requestId);
}

/** Events of a turn's run (TURN_KINDS) other than its CLI lines. */
function turnEvent(s: ProjectionState, env: ReducibleEnvelope): void {
  const ti = turnAt(s, env.turn);
  switch (env.kind) {
    case "turn.queued":
      turnQueued(s, env, ti);
      return;
    case "attempt.started":
      attemptStarted(s, env, ti);
      return;
    case "cli.stderr":
      // Counted only: stderr may hold what the scrubber did not know to take out.
      read(s, "cli.stderr", env.data);
      attemptAt(s, ti, env.attempt, env.epoch, env.at).stderrLines++;
      return;
    case "cli.exit":
      cliExit(s, env, ti);
      return;
    case "model.call":
      modelCall(s, env, ti);
      return;
    case "attempt.abandoned":
      attemptAbandoned(s, env, ti);
      return;
    case "turn.finished":
      turnFinished(s, env, ti);
      return;
    case "turn.failed":
      turnFailed(s, env, ti);
      return;
    case "turn.cancelled":
      turnCancelled(s, env, ti);
      return;
  }
}

/** One call through the worker's gateway: counted on its attempt with its usage and estimated cost. */
function modelCall(s: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const d = read(s, "model.call", env.data);
  if (d === undefined) return;
  const m = attemptAt(s, ti, env.attempt, env.epoch, env.at).modelCalls;
  m.calls++;
  if (d.status >= 400) m.errors++;
  if (d.costUsd !== undefined) m.costUsd += d.costUsd;
  if (d.usage === undefined) return;
  m.tokens.input += d.usage.input_tokens;
  m.tokens.output += d.usage.output_tokens;
  m.tokens.cacheRead += d.usage.cache_read_input_tokens;
  m.tokens.cacheCreation += d.usage.cache_creation_input_tokens;
}

function turnQueued(s: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const d = read(s, "turn.queued", env.data);
  const t = s.view.turns[ti]!;
  if (t.queuedAt === null) t.queuedAt = env.at;
  const tt = s.transcript.turns[ti]!;
  if (tt.prompt === null && d !== undefined) {
    tt.prompt = d.prompt;
    tt.promptSeq = env.seq;
  }
  if (d !== undefined && s.view.cwd === null) s.view.cwd = d.cwd;
  if (d?.model !== undefined && s.view.model === null) s.view.model = d.model;
  refreshStatus(s, ti);
}

function attemptStarted(s: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const d = read(s, "attempt.started", env.data);
  const t = s.view.turns[ti]!;
  // A later attempt of the same turn means the earlier ones will never write again (fenced).
  for (const a of t.attempts) {
    if (a.attempt < env.attempt && (a.status === "running" || a.status === "exited"))
      abandon(s, ti, a.attempt, "superseded");
  }
  const a = attemptAt(s, ti, env.attempt, env.epoch, env.at);
  if (a.status !== "abandoned") a.status = "running";
  if (d?.cliVersion !== undefined) s.view.cliVersion = d.cliVersion;
  if (d !== undefined) s.view.cwd = d.cwd;
  if (d?.model !== undefined && s.view.model === null) s.view.model = d.model;
  // Where the attempt's CLI session's count starts: recorded when resuming, 0 for a fresh session; a
  // resumed attempt of a log from before it was recorded is left to its first result (attemptCost).
  const costBase = d === undefined ? undefined : (d.costBaseUsd ?? (d.resume === undefined ? 0 : undefined));
  if (costBase !== undefined) s.cursor.costBase[`${ti}:${env.attempt}`] = costBase;
  if (!TERMINAL_TURN.has(t.status)) t.status = "running";
  refreshAccepted(s, ti);
  refreshStatus(s, ti);
}

function cliExit(s: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const d = read(s, "cli.exit", env.data);
  const a = attemptAt(s, ti, env.attempt, env.epoch, env.at);
  a.exitCode = d?.code ?? null;
  a.signal = d?.signal ?? null;
  a.endedAt = env.at;
  if (a.status === "running") a.status = "exited";
}

function attemptAbandoned(s: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const d = read(s, "attempt.abandoned", env.data);
  // The data names the abandoned attempt: a later attempt may record an earlier one's death.
  const n = d?.attempt ?? env.attempt;
  const a = attemptAt(s, ti, n, env.epoch, env.at);
  if (a.endedAt === null) a.endedAt = env.at;
  abandon(s, ti, n, d?.reason ?? "abandoned");
  refreshStatus(s, ti);
}

/** Ends the turn with attempt `n` (named by turn.finished/failed) as its outcome; returns that attempt's view. */
function endTurn(
  s: ProjectionState,
  env: ReducibleEnvelope,
  ti: number,
  status: "finished" | "failed",
  n: number,
): AttemptView | undefined {
  const t = s.view.turns[ti]!;
  t.status = status;
  t.endedAt = env.at;
  const i = findAttempt(t, n);
  const a = i >= 0 ? t.attempts[i]! : undefined;
  if (a !== undefined && a.status !== "abandoned") {
    a.status = status;
    if (a.endedAt === null) a.endedAt = env.at;
  }
  refreshAccepted(s, ti, n);
  return a;
}

function turnFinished(s: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const d = read(s, "turn.finished", env.data);
  const a = endTurn(s, env, ti, "finished", d?.attempt ?? env.attempt);
  const t = s.view.turns[ti]!;
  t.errorKind = a?.errorKind ?? null;
  setError(s, t.errorKind, env.seq);
  if (d?.cliSessionId !== undefined) s.view.cliSessionId = d.cliSessionId;
  // The accepted attempt's last total is where its CLI session stands for the session's next turn.
  const total = a === undefined ? undefined : s.cursor.costTotal[`${ti}:${a.attempt}`];
  if (a !== undefined && a.cliSessionId !== null && total !== undefined) s.cursor.cliCostTotals[a.cliSessionId] = total;
  forgetCosts(s, ti);
  refreshStatus(s, ti);
}

/** Drops the per-attempt cost bookkeeping of an ended turn (what its next turn needs is in cliCostTotals). */
function forgetCosts(s: ProjectionState, ti: number): void {
  for (const a of s.view.turns[ti]!.attempts) {
    delete s.cursor.costBase[`${ti}:${a.attempt}`];
    delete s.cursor.costTotal[`${ti}:${a.attempt}`];
  }
}

function turnFailed(s: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  const d = read(s, "turn.failed", env.data);
  const a = endTurn(s, env, ti, "failed", d?.attempt ?? env.attempt);
  const t = s.view.turns[ti]!;
  t.errorKind = (d?.errorKind as ErrorKind | undefined) ?? a?.errorKind ?? null;
  t.error = d === undefined ? null : { name: d.error.name, message: d.error.message };
  setError(s, t.errorKind ?? "cli_error", env.seq);
  forgetCosts(s, ti);
  refreshStatus(s, ti);
}

function turnCancelled(s: ProjectionState, env: ReducibleEnvelope, ti: number): void {
  read(s, "turn.cancelled", env.data);
  const t = s.view.turns[ti]!;
  t.status = "cancelled";
  t.endedAt = env.at;
  forgetCosts(s, ti);
  refreshAccepted(s, ti);
  refreshStatus(s, ti);
}

// ---- CLI lines -------------------------------------------------------------------------------

function cliLine(s: ProjectionState, env: ReducibleEnvelope): void {
  const ti = turnAt(s, env.turn);
  const a = attemptAt(s, ti, env.attempt, env.epoch, env.at);
  a.lines++;
  const d = read(s, "cli.line", env.data);
  if (d === undefined) return;
  if (d.raw === "" && d.truncated !== undefined) {
    countLine(s, env.seq, "truncated");
    return;
  }
  const p = parseLine(d.raw);
  if (p.category === "invalid") {
    countLine(s, env.seq, "invalid");
    return;
  }
  if (p.category !== "known") countLine(s, env.seq, p.type);
  const o = objOf(p);
  if (o === undefined) return;
  const key = `${ti}:${a.attempt}`;
  const sid = stringField(o, "session_id");
  if (sid !== undefined && a.cliSessionId === null) a.cliSessionId = sid;
  switch (o["type"]) {
    case "assistant":
      assistant(s, env, ti, key, o);
      return;
    case "user":
      user(s, env, ti, key, o);
      return;
    case "result":
      result(s, env, a, key, o);
      return;
    case "system":
      system(s, env, ti, key, o);
      return;
  }
}

function countLine(s: ProjectionState, seq: number, type: string): void {
  s.carried.lineTypes[type] = (s.carried.lineTypes[type] ?? 0) + 1;
  carry(s, seq, "cli.line", type);
}

function toolPaths(s: ProjectionState, key: string): Record<string, number[]> {
  let p = s.cursor.toolPaths[key];
  if (p === undefined) {
    p = {};
    s.cursor.toolPaths[key] = p;
  }
  return p;
}

function itemAt(root: TranscriptItem[], path: number[]): TranscriptItem | undefined {
  let items = root;
  let item: TranscriptItem | undefined;
  for (let i = 0; i < path.length; i++) {
    item = items[path[i]!];
    if (item === undefined) return undefined;
    if (i < path.length - 1) {
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
  s: ProjectionState,
  env: ReducibleEnvelope,
  ti: number,
  key: string,
  parent: string | undefined,
): Group {
  const ta = transcriptAttempt(s, ti, env.attempt);
  if (parent === undefined) return { items: ta.items, path: [] };
  const paths = toolPaths(s, key);
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

function assistant(s: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, o: Obj): void {
  const parent = stringField(o, "parent_tool_use_id");
  const g = groupFor(s, env, ti, key, parent);
  const msg = objField(o, "message");
  const messageId = stringField(msg, "id") ?? null;
  const model = stringField(msg, "model");
  if (model !== undefined && model !== "<synthetic>" && parent === undefined) s.view.model = model;
  const error = stringField(o, "error");
  const blocks = contentBlocks(o);
  if (error !== undefined) {
    s.cursor.synthetic[key] = error;
    const text = blocks.map((b) => (typeof b["text"] === "string" ? b["text"] : "")).join("\n");
    g.items.push({ t: "api_error", error, text, seq: env.seq });
    return;
  }
  const paths = toolPaths(s, key);
  for (const b of blocks) {
    const type = b["type"];
    if (type === "text") {
      const text = typeof b["text"] === "string" ? b["text"] : "";
      if (text !== "") g.items.push({ t: "text", text, seq: env.seq, messageId });
    } else if (type === "tool_use") {
      const id = stringField(b, "id");
      if (id === undefined || paths[id] !== undefined) continue; // no id, or the same block printed twice
      paths[id] = [...g.path, g.items.length];
      g.items.push({
        t: "tool",
        id,
        name: typeof b["name"] === "string" ? b["name"] : "",
        input: b["input"] === undefined ? null : b["input"],
        seq: env.seq,
        result: null,
        subagent: [],
      });
    } else if (type === "thinking" || type === "redacted_thinking") {
      // Never part of the transcript.
    } else {
      countLine(s, env.seq, `assistant.block:${String(type)}`);
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

function user(s: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, o: Obj): void {
  const parent = stringField(o, "parent_tool_use_id");
  const blocks = contentBlocks(o);
  const ta = transcriptAttempt(s, ti, env.attempt);
  const paths = toolPaths(s, key);
  let results = 0;
  for (const b of blocks) if (b["type"] === "tool_result") results++;
  let g: Group | undefined;
  for (const b of blocks) {
    const type = b["type"];
    if (type === "tool_result") {
      const id = typeof b["tool_use_id"] === "string" ? b["tool_use_id"] : "";
      // `is_error` may be absent on success; a string tool_use_result means failure (measured).
      const isError = b["is_error"] === true || (results === 1 && typeof o["tool_use_result"] === "string");
      const view = resultView(b["content"], isError, env.seq);
      const path = paths[id];
      const call = path === undefined ? undefined : itemAt(ta.items, path);
      if (call !== undefined && call.t === "tool" && call.result === null) {
        call.result = view;
      } else {
        g ??= groupFor(s, env, ti, key, parent);
        g.items.push({ t: "orphan_result", toolUseId: id, result: view });
      }
    } else if (type === "text") {
      const text = typeof b["text"] === "string" ? b["text"] : "";
      if (text === "") continue;
      g ??= groupFor(s, env, ti, key, parent);
      g.items.push({ t: "user", text, seq: env.seq });
    }
  }
  const meta = o["tool_result_meta"];
  if (Array.isArray(meta)) {
    for (const m of meta) {
      if (!isObj(m)) continue;
      const pd = m["permission_decision"];
      if (!isObj(pd)) continue;
      const id = stringField(m, "id");
      outcome(s, env, `${key}|meta|${id ?? env.seq}`, {
        source: "tool_result_meta",
        toolUseId: id,
        toolName: toolNameOf(s, ti, env.attempt, key, id),
        decision: stringField(pd, "decision"),
        by: stringField(pd, "source"),
        reason: stringField(pd, "reason_type"),
      });
    }
  }
}

function toolNameOf(
  s: ProjectionState,
  ti: number,
  attempt: number,
  key: string,
  id: string | undefined,
): string | undefined {
  if (id === undefined) return undefined;
  const path = s.cursor.toolPaths[key]?.[id];
  if (path === undefined) return undefined;
  const item = itemAt(transcriptAttempt(s, ti, attempt).items, path);
  return item !== undefined && item.t === "tool" && item.name !== "" ? item.name : undefined;
}

function result(s: ProjectionState, env: ReducibleEnvelope, a: AttemptView, key: string, o: Obj): void {
  a.results++;
  const kind = classifyResult(o, s.cursor.synthetic[key]);
  delete s.cursor.synthetic[key];
  a.errorKind = kind;
  setError(s, kind, env.seq);
  const sid = stringField(o, "session_id");
  if (sid !== undefined) s.view.cliSessionId = sid;
  // total_cost_usd is the CLI session's running total (a run with background subagents prints two
  // results with the same figure; a resumed session goes on from its earlier turns), so the latest
  // replaces the attempt's total; usage is per result (measured: the second result of that run
  // reports its own smaller usage, each turn of a resumed session its own), so it adds up.
  const total = numberField(o, "total_cost_usd");
  if (total !== undefined) attemptCost(s, key, a, sid, total);
  const u = objField(o, "usage");
  if (u !== undefined) {
    for (const t of [a.tokens, s.view.tokens]) {
      t.input += numberField(u, "input_tokens") ?? 0;
      t.output += numberField(u, "output_tokens") ?? 0;
      t.cacheRead += numberField(u, "cache_read_input_tokens") ?? 0;
      t.cacheCreation += numberField(u, "cache_creation_input_tokens") ?? 0;
    }
  }
  const denials = o["permission_denials"];
  if (Array.isArray(denials)) {
    const ti = s.cursor.turnIndex[env.turn]!;
    for (const d of denials) {
      if (!isObj(d)) continue;
      const id = stringField(d, "tool_use_id");
      outcome(s, env, `${key}|denial|${id ?? JSON.stringify(d)}`, {
        source: "permission_denials",
        toolUseId: id,
        toolName: stringField(d, "tool_name") ?? toolNameOf(s, ti, env.attempt, key, id),
        decision: "deny",
      });
    }
  }
}

/** Sets the attempt's cost from its latest running total: the rise over where its CLI session stood before it. */
function attemptCost(
  s: ProjectionState,
  key: string,
  a: AttemptView,
  cliSessionId: string | undefined,
  total: number,
): void {
  const c = s.cursor;
  // Known from attempt.started, or else where the session's last finished turn left this CLI session (0 if new).
  const base = (c.costBase[key] ??= (cliSessionId === undefined ? undefined : c.cliCostTotals[cliSessionId]) ?? 0);
  c.costTotal[key] = total;
  const cost = costAdded(base, total);
  s.view.costUsd += cost - a.costUsd;
  a.costUsd = cost;
}

function system(s: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, o: Obj): void {
  const sub = o["subtype"];
  if (sub === "init") {
    const t = s.view.turns[ti]!;
    const a = t.attempts[findAttempt(t, env.attempt)]!;
    const sid = stringField(o, "session_id");
    if (sid !== undefined) {
      s.view.cliSessionId = sid;
      a.cliSessionId = sid;
    }
    const cwd = stringField(o, "cwd");
    if (cwd !== undefined) s.view.cwd = cwd;
    const model = stringField(o, "model");
    if (model !== undefined) s.view.model = model;
    const version = stringField(o, "claude_code_version");
    if (version !== undefined) s.view.cliVersion = version;
  } else if (sub === "permission_denied") {
    const id = stringField(o, "tool_use_id");
    outcome(s, env, `${key}|pd|${id ?? stringField(o, "uuid") ?? env.seq}`, {
      source: "permission_denied",
      toolUseId: id,
      toolName: stringField(o, "tool_name") ?? toolNameOf(s, ti, env.attempt, key, id),
      decision: "deny",
      by: stringField(o, "decision_reason_type"),
      reason: stringField(o, "decision_reason") ?? stringField(o, "message"),
    });
  } else if (sub === "hook_response") {
    outcome(s, env, `${key}|hook|${stringField(o, "hook_id") ?? stringField(o, "uuid") ?? env.seq}`, {
      source: "hook_response",
      toolUseId: stringField(o, "tool_use_id"),
      toolName: stringField(o, "tool_name"),
      decision: hookDecision(o),
      by: stringField(o, "hook_name") ?? stringField(o, "hook_event"),
      reason: stringField(o, "outcome"),
    });
  }
}

/** A PreToolUse hook's decision from its JSON output, or exit code 2 (= block). */
function hookDecision(o: Obj): string | undefined {
  for (const k of ["output", "stdout"]) {
    const text = o[k];
    if (typeof text !== "string" || !text.trimStart().startsWith("{")) continue;
    try {
      const j = JSON.parse(text) as unknown;
      if (!isObj(j)) continue;
      const hso = objField(j, "hookSpecificOutput");
      const d = stringField(hso, "permissionDecision") ?? stringField(j, "decision");
      if (d !== undefined) return d === "block" ? "deny" : d === "approve" ? "allow" : d;
    } catch {
      // not JSON: no decision in it
    }
  }
  return o["exit_code"] === 2 ? "deny" : undefined;
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
  s: ProjectionState,
  env: { seq: number; turn: string; attempt: number },
  dedupeKey: string,
  r: OutcomeReport,
): void {
  if (s.cursor.outcomeKeys[dedupeKey] !== undefined) return;
  s.cursor.outcomeKeys[dedupeKey] = env.seq;
  const ti = s.cursor.turnIndex[env.turn];
  if (ti !== undefined) (s.cursor.attemptOutcomes[`${ti}:${env.attempt}`] ??= []).push(s.decisions.outcomes.length);
  const o: DecisionOutcome = {
    seq: env.seq,
    turn: env.turn,
    attempt: env.attempt,
    abandoned: isAbandoned(s, env.turn, env.attempt),
    source: r.source,
    toolUseId: r.toolUseId ?? null,
    toolName: r.toolName ?? null,
    decision: r.decision ?? null,
    by: r.by ?? null,
    reason: r.reason ?? null,
    requestId: r.requestId ?? null,
  };
  s.decisions.outcomes.push(o);
}

/** Whether the attempt is known and abandoned (what it reports then does not count). */
function isAbandoned(s: ProjectionState, turn: string, attempt: number): boolean {
  const ti = s.cursor.turnIndex[turn];
  if (ti === undefined) return false;
  const t = s.view.turns[ti]!;
  const i = findAttempt(t, attempt);
  return i >= 0 && t.attempts[i]!.status === "abandoned";
}

// ---- hub decisions and rules -----------------------------------------------------------------

function decisionRequested(s: ProjectionState, env: ReducibleEnvelope): void {
  const d = read(s, "decision.requested", env.data);
  if (d === undefined || s.cursor.requestIndex[d.requestId] !== undefined) return;
  const ti = s.cursor.turnIndex[env.turn];
  const abandoned = isAbandoned(s, env.turn, env.attempt);
  s.cursor.requestIndex[d.requestId] = s.decisions.requests.length;
  if (ti !== undefined) (s.cursor.attemptRequests[`${ti}:${env.attempt}`] ??= []).push(s.decisions.requests.length);
  s.decisions.requests.push({
    requestId: d.requestId,
    seq: env.seq,
    turn: env.turn,
    attempt: env.attempt,
    toolName: d.tool,
    toolUseId: d.toolUseId ?? null,
    summary: d.input,
    deadline: d.expiresAt,
    status: abandoned ? "abandoned" : "pending",
    decision: null,
    by: null,
    decidedSeq: null,
  });
  if (!abandoned) s.decisions.pending.push(d.requestId);
}

function decisionMade(s: ProjectionState, env: ReducibleEnvelope): void {
  const d = read(s, "decision.made", env.data);
  if (d === undefined) return;
  // An operator's decision counts only signed: anyone who can write Redis can append an unsigned one
  // (the read model holds no keys to check a signature; the hub and `decide` do).
  if (d.source === "operator" && (d.keyId === undefined || d.signature === undefined)) return;
  const i = s.cursor.requestIndex[d.requestId];
  const r = i === undefined ? undefined : s.decisions.requests[i];
  if (r === undefined) s.decisions.unmatchedDecisions++;
  else if (r.decidedSeq !== null) return; // the first answer counts
  if (r !== undefined) {
    r.decision = d.decision;
    r.by = d.by;
    r.decidedSeq = env.seq;
    if (r.status === "pending") {
      r.status = "decided";
      s.decisions.pending = s.decisions.pending.filter((id) => id !== r.requestId);
    }
  }
  const where = r ?? { turn: env.turn, attempt: env.attempt };
  outcome(s, { seq: env.seq, turn: where.turn, attempt: where.attempt }, `hub|${d.requestId}`, {
    source: "hub",
    toolUseId: r?.toolUseId ?? undefined,
    toolName: r?.toolName ?? undefined,
    decision: d.decision,
    by: d.by,
    reason: d.reason,
    requestId: d.requestId,
  });
}

/** A rule as the read model lists it: the effect is its decision, the tool the one its pattern names. */
function ruleView(seq: number, d: EventData<"rule.added"> | undefined): Rule {
  return {
    seq,
    ruleId: d?.ruleId ?? null,
    tool: d === undefined ? null : toolOfPattern(d.pattern),
    pattern: d?.pattern ?? null,
    decision: d?.effect ?? null,
    by: d?.by ?? null,
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
