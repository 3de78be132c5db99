// The reducer: envelope → state, for every read model at once. No I/O, no clock (times come from the
// envelopes), no randomness: folding the same log always gives the same state, which is what lets a
// live projection be checked against (and replaced by) a rebuild from zero.
//
// `applyEvent` updates the state in place for speed (a million-event rebuild must not copy the state
// per event); `reduceSession` is the copying form for callers that keep the old state.
import type { Envelope } from "../log/index.ts";
import {
  classifyResult,
  parseLine,
  toolResultText,
  type ErrorKind,
  type ParsedLine,
} from "../protocol/index.ts";
import { dataOf } from "./event-data.ts";
import {
  initialState,
  zeroTokens,
  type AttemptView,
  type DecisionOutcome,
  type DecisionSource,
  type ProjectionState,
  type ToolResultView,
  type TranscriptAttempt,
  type TranscriptItem,
  type TurnStatus,
  type TurnView,
} from "./state.ts";

/** Tool results longer than this are cut in the read model (the log keeps every byte). */
export const MAX_RESULT_CHARS = 32_000;
const RECENT_CARRIED = 20;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const str = (o: Obj | undefined, k: string): string | null => {
  const v = o?.[k];
  return typeof v === "string" ? v : null;
};
const num = (o: Obj | undefined, k: string): number | null => {
  const v = o?.[k];
  return typeof v === "number" && Number.isFinite(v) ? v : null;
};

/** The minimal envelope the reducer reads (a full Envelope fits). */
export type ReducibleEnvelope = Pick<Envelope, "seq" | "session" | "turn" | "attempt" | "epoch" | "at" | "kind" | "data">;

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

const TURN_KINDS = new Set([
  "turn.queued",
  "attempt.started",
  "cli.line",
  "cli.stderr",
  "cli.exit",
  "attempt.abandoned",
  "turn.finished",
  "turn.failed",
  "turn.cancelled",
]);

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
  const kind = env.kind;
  if (kind === "cli.line") {
    cliLine(s, env);
    return s;
  }
  if (TURN_KINDS.has(kind)) {
    turnEvent(s, env);
    return s;
  }
  switch (kind) {
    case "session.snapshot": {
      const d = dataOf("session.snapshot", env.data);
      if (d === undefined) malformed(s, kind);
      v.snapshots++;
      if (d?.cliSessionId !== undefined) v.cliSessionId = d.cliSessionId;
      return s;
    }
    case "session.replayed":
      v.replays++;
      return s;
    case "decision.requested":
      decisionRequested(s, env);
      return s;
    case "decision.made":
      decisionMade(s, env);
      return s;
    case "rule.added": {
      const d = dataOf("rule.added", env.data);
      if (d === undefined) malformed(s, kind);
      s.decisions.rules.push({
        seq: env.seq,
        ruleId: d?.ruleId ?? null,
        tool: d?.tool ?? null,
        pattern: d?.pattern ?? null,
        decision: d?.decision ?? null,
        by: d?.by ?? null,
      });
      return s;
    }
    default:
      carry(s, env.seq, kind, null);
      s.carried.kinds[kind] = (s.carried.kinds[kind] ?? 0) + 1;
      return s;
  }
}

function carry(s: ProjectionState, seq: number, kind: string, type: string | null): void {
  const c = s.carried;
  c.total++;
  c.recent.push({ seq, kind, type });
  if (c.recent.length > RECENT_CARRIED) c.recent.splice(0, c.recent.length - RECENT_CARRIED);
}

function malformed(s: ProjectionState, kind: string): void {
  s.carried.malformed[kind] = (s.carried.malformed[kind] ?? 0) + 1;
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

function turnEvent(s: ProjectionState, env: ReducibleEnvelope): void {
  const ti = turnAt(s, env.turn);
  const t = s.view.turns[ti]!;
  const kind = env.kind;
  switch (kind) {
    case "turn.queued": {
      const d = dataOf("turn.queued", env.data);
      if (d === undefined) malformed(s, kind);
      if (t.queuedAt === null) t.queuedAt = env.at;
      const tt = s.transcript.turns[ti]!;
      if (tt.prompt === null && typeof d?.prompt === "string") {
        tt.prompt = d.prompt;
        tt.promptSeq = env.seq;
      }
      if (d?.cwd !== undefined && s.view.cwd === null) s.view.cwd = d.cwd;
      if (d?.model !== undefined && s.view.model === null) s.view.model = d.model;
      refreshStatus(s, ti);
      return;
    }
    case "attempt.started": {
      const d = dataOf("attempt.started", env.data);
      if (d === undefined) malformed(s, kind);
      // A later attempt of the same turn means the earlier ones will never write again (fenced).
      for (const a of t.attempts) {
        if (a.attempt < env.attempt && (a.status === "running" || a.status === "exited")) abandon(s, ti, a.attempt, "superseded");
      }
      const a = attemptAt(s, ti, env.attempt, env.epoch, env.at);
      if (a.status !== "abandoned") a.status = "running";
      if (d?.cliVersion !== undefined) s.view.cliVersion = d.cliVersion;
      if (d?.cwd !== undefined) s.view.cwd = d.cwd;
      if (d?.model !== undefined && s.view.model === null) s.view.model = d.model;
      if (!TERMINAL_TURN.has(t.status)) t.status = "running";
      refreshAccepted(s, ti);
      refreshStatus(s, ti);
      return;
    }
    case "cli.stderr":
      attemptAt(s, ti, env.attempt, env.epoch, env.at).stderrLines++;
      return;
    case "cli.exit": {
      const d = dataOf("cli.exit", env.data);
      if (d === undefined) malformed(s, kind);
      const a = attemptAt(s, ti, env.attempt, env.epoch, env.at);
      a.exitCode = d?.code ?? null;
      a.signal = d?.signal ?? null;
      a.endedAt = env.at;
      if (a.status === "running") a.status = "exited";
      return;
    }
    case "attempt.abandoned": {
      const d = dataOf("attempt.abandoned", env.data);
      if (d === undefined) malformed(s, kind);
      const n = d?.attempt ?? env.attempt;
      const a = attemptAt(s, ti, n, env.epoch, env.at);
      if (a.endedAt === null) a.endedAt = env.at;
      abandon(s, ti, n, d?.reason ?? "abandoned");
      refreshStatus(s, ti);
      return;
    }
    case "turn.finished":
    case "turn.failed": {
      const d = kind === "turn.finished" ? dataOf("turn.finished", env.data) : dataOf("turn.failed", env.data);
      if (d === undefined) malformed(s, kind);
      const n = d?.attempt ?? env.attempt;
      t.status = kind === "turn.finished" ? "finished" : "failed";
      t.endedAt = env.at;
      const i = findAttempt(t, n);
      const a = i >= 0 ? t.attempts[i]! : undefined;
      if (a !== undefined && a.status !== "abandoned") {
        a.status = t.status;
        if (a.endedAt === null) a.endedAt = env.at;
      }
      refreshAccepted(s, ti, n);
      t.errorKind = (d?.errorKind as ErrorKind | undefined) ?? a?.errorKind ?? null;
      if (kind === "turn.failed") {
        const e = (d as { error?: unknown } | undefined)?.error;
        t.error =
          typeof e === "string"
            ? { name: null, message: e }
            : isObj(e)
              ? { name: str(e, "name"), message: str(e, "message") }
              : null;
        setError(s, t.errorKind ?? "cli_error", env.seq);
      } else {
        setError(s, t.errorKind, env.seq);
        const sid = (d as { cliSessionId?: string } | undefined)?.cliSessionId;
        if (sid !== undefined) s.view.cliSessionId = sid;
      }
      refreshStatus(s, ti);
      return;
    }
    case "turn.cancelled": {
      if (dataOf("turn.cancelled", env.data) === undefined) malformed(s, kind);
      t.status = "cancelled";
      t.endedAt = env.at;
      refreshAccepted(s, ti);
      refreshStatus(s, ti);
      return;
    }
  }
}

// ---- CLI lines -------------------------------------------------------------------------------

function cliLine(s: ProjectionState, env: ReducibleEnvelope): void {
  const ti = turnAt(s, env.turn);
  const a = attemptAt(s, ti, env.attempt, env.epoch, env.at);
  a.lines++;
  const data = env.data as Obj;
  const raw = data["raw"];
  if (typeof raw !== "string" || (raw === "" && data["truncated"] !== undefined)) {
    countLine(s, env.seq, "truncated");
    return;
  }
  // Line types the read models take nothing from are counted by their type, not parsed: the CLI
  // prints `type` (and `subtype`) first, and anything else goes through the full parser.
  const skipped = skippableType(raw);
  if (skipped !== undefined) return;
  const p: ParsedLine = raw.startsWith(INIT_PREFIX) ? (initLine(raw) ?? parseLine(raw)) : parseLine(raw);
  if (p.category === "invalid") {
    countLine(s, env.seq, "invalid");
    return;
  }
  if (p.category !== "known") countLine(s, env.seq, p.type);
  const o = p.line as Obj;
  const key = `${ti}:${a.attempt}`;
  const sid = str(o, "session_id");
  if (sid !== null && a.cliSessionId === null) a.cliSessionId = sid;
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

const SKIP_SYSTEM = new Set([
  "api_retry",
  "status",
  "thinking_tokens",
  "hook_started",
  "task_started",
  "task_progress",
  "task_updated",
  "task_notification",
  "background_tasks_changed",
  "compact_boundary",
]);
const SYSTEM_PREFIX = '{"type":"system","subtype":"';
const INIT_PREFIX = '{"type":"system","subtype":"init"';

const optStr = (v: unknown): boolean => v === undefined || typeof v === "string";
/**
 * Hand-written SystemInitSchema for the large `system/init` line the CLI prints every turn (the
 * protocol has no fast check for it, and zod costs half a JSON.parse of it). Accepts only what the
 * schema accepts (test/projector/init-fast.test.ts); anything else returns false and goes to zod.
 */
export function fastInitCheck(o: Obj): boolean {
  if (o["type"] !== "system" || o["subtype"] !== "init") return false;
  const tools = o["tools"];
  if (tools !== undefined) {
    if (!Array.isArray(tools)) return false;
    for (let i = 0; i < tools.length; i++) if (typeof tools[i] !== "string") return false;
  }
  return (
    optStr(o["session_id"]) &&
    optStr(o["uuid"]) &&
    optStr(o["cwd"]) &&
    optStr(o["model"]) &&
    optStr(o["permissionMode"]) &&
    optStr(o["claude_code_version"]) &&
    optStr(o["apiKeySource"])
  );
}

/** A system/init line as parseLine would return it, when the fast check vouches for it. */
function initLine(raw: string): ParsedLine | undefined {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!isObj(v) || Object.getPrototypeOf(v) !== Object.prototype || !fastInitCheck(v)) return undefined;
  return { category: "known", raw, type: "system/init", line: v as Extract<ParsedLine, { category: "known" }>["line"] };
}
/** The type key of a line the reducer has no use for (and whose type has a schema), else undefined. */
function skippableType(raw: string): string | undefined {
  if (raw.startsWith(SYSTEM_PREFIX)) {
    const end = raw.indexOf('"', SYSTEM_PREFIX.length);
    const sub = end < 0 ? "" : raw.slice(SYSTEM_PREFIX.length, end);
    return SKIP_SYSTEM.has(sub) && raw.endsWith("}") ? `system/${sub}` : undefined;
  }
  if ((raw.startsWith('{"type":"stream_event"') || raw.startsWith('{"type":"rate_limit_event"')) && raw.endsWith("}")) return "skipped";
  return undefined;
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
function groupFor(s: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, parent: string | null): Group {
  const ta = transcriptAttempt(s, ti, env.attempt);
  if (parent === null) return { items: ta.items, path: [] };
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

function blocksOf(o: Obj): Obj[] {
  const m = o["message"];
  if (!isObj(m)) return [];
  const c = m["content"];
  if (typeof c === "string") return [{ type: "text", text: c }];
  return Array.isArray(c) ? c.filter(isObj) : [];
}

function assistant(s: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, o: Obj): void {
  const parent = str(o, "parent_tool_use_id");
  const g = groupFor(s, env, ti, key, parent);
  const msg = isObj(o["message"]) ? o["message"] : undefined;
  const messageId = str(msg, "id");
  const model = str(msg, "model");
  if (model !== null && model !== "<synthetic>" && parent === null) s.view.model = model;
  const error = str(o, "error");
  const blocks = blocksOf(o);
  if (error !== null) {
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
      const id = typeof b["id"] === "string" ? b["id"] : null;
      if (id === null || paths[id] !== undefined) continue; // no id, or the same block printed twice
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
  return { text: cut ? full.slice(0, MAX_RESULT_CHARS) : full, isError, seq, droppedChars: cut ? full.length - MAX_RESULT_CHARS : 0 };
}

function user(s: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, o: Obj): void {
  const parent = str(o, "parent_tool_use_id");
  const blocks = blocksOf(o);
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
      const id = str(m, "id");
      outcome(s, env, `${key}|meta|${id ?? env.seq}`, {
        source: "tool_result_meta",
        toolUseId: id,
        toolName: toolNameOf(s, ti, env.attempt, key, id),
        decision: str(pd, "decision"),
        by: str(pd, "source"),
        reason: str(pd, "reason_type"),
        requestId: null,
      });
    }
  }
}

function toolNameOf(s: ProjectionState, ti: number, attempt: number, key: string, id: string | null): string | null {
  if (id === null) return null;
  const path = s.cursor.toolPaths[key]?.[id];
  if (path === undefined) return null;
  const item = itemAt(transcriptAttempt(s, ti, attempt).items, path);
  return item !== undefined && item.t === "tool" && item.name !== "" ? item.name : null;
}

function result(s: ProjectionState, env: ReducibleEnvelope, a: AttemptView, key: string, o: Obj): void {
  a.results++;
  const kind = classifyResult(o, s.cursor.synthetic[key]);
  delete s.cursor.synthetic[key];
  a.errorKind = kind;
  setError(s, kind, env.seq);
  const sid = str(o, "session_id");
  if (sid !== null) s.view.cliSessionId = sid;
  // total_cost_usd is the CLI process's running total (a run with background subagents prints two
  // results with the same figure), so the latest replaces the attempt's; usage is per result
  // (measured: the second result of that run reports its own smaller usage), so it adds up.
  const cost = num(o, "total_cost_usd");
  if (cost !== null) {
    s.view.costUsd += cost - a.costUsd;
    a.costUsd = cost;
  }
  const u = isObj(o["usage"]) ? o["usage"] : undefined;
  if (u !== undefined) {
    for (const t of [a.tokens, s.view.tokens]) {
      t.input += num(u, "input_tokens") ?? 0;
      t.output += num(u, "output_tokens") ?? 0;
      t.cacheRead += num(u, "cache_read_input_tokens") ?? 0;
      t.cacheCreation += num(u, "cache_creation_input_tokens") ?? 0;
    }
  }
  const denials = o["permission_denials"];
  if (Array.isArray(denials)) {
    const ti = s.cursor.turnIndex[env.turn]!;
    for (const d of denials) {
      if (!isObj(d)) continue;
      const id = str(d, "tool_use_id");
      outcome(s, env, `${key}|denial|${id ?? JSON.stringify(d)}`, {
        source: "permission_denials",
        toolUseId: id,
        toolName: str(d, "tool_name") ?? toolNameOf(s, ti, env.attempt, key, id),
        decision: "deny",
        by: null,
        reason: null,
        requestId: null,
      });
    }
  }
}

function system(s: ProjectionState, env: ReducibleEnvelope, ti: number, key: string, o: Obj): void {
  const sub = o["subtype"];
  if (sub === "init") {
    const t = s.view.turns[ti]!;
    const a = t.attempts[findAttempt(t, env.attempt)]!;
    const sid = str(o, "session_id");
    if (sid !== null) {
      s.view.cliSessionId = sid;
      a.cliSessionId = sid;
    }
    const cwd = str(o, "cwd");
    if (cwd !== null) s.view.cwd = cwd;
    const model = str(o, "model");
    if (model !== null) s.view.model = model;
    const version = str(o, "claude_code_version");
    if (version !== null) s.view.cliVersion = version;
  } else if (sub === "permission_denied") {
    const id = str(o, "tool_use_id");
    outcome(s, env, `${key}|pd|${id ?? str(o, "uuid") ?? env.seq}`, {
      source: "permission_denied",
      toolUseId: id,
      toolName: str(o, "tool_name") ?? toolNameOf(s, ti, env.attempt, key, id),
      decision: "deny",
      by: str(o, "decision_reason_type"),
      reason: str(o, "decision_reason") ?? str(o, "message"),
      requestId: null,
    });
  } else if (sub === "hook_response") {
    outcome(s, env, `${key}|hook|${str(o, "hook_id") ?? str(o, "uuid") ?? env.seq}`, {
      source: "hook_response",
      toolUseId: str(o, "tool_use_id"),
      toolName: str(o, "tool_name"),
      decision: hookDecision(o),
      by: str(o, "hook_name") ?? str(o, "hook_event"),
      reason: str(o, "outcome"),
      requestId: null,
    });
  }
}

/** A PreToolUse hook's decision from its JSON output, or exit code 2 (= block). */
function hookDecision(o: Obj): string | null {
  for (const k of ["output", "stdout"]) {
    const text = o[k];
    if (typeof text !== "string" || !text.trimStart().startsWith("{")) continue;
    try {
      const j = JSON.parse(text) as unknown;
      if (!isObj(j)) continue;
      const hso = isObj(j["hookSpecificOutput"]) ? j["hookSpecificOutput"] : undefined;
      const d = str(hso, "permissionDecision") ?? str(j, "decision");
      if (d !== null) return d === "block" ? "deny" : d === "approve" ? "allow" : d;
    } catch {
      // not JSON: no decision in it
    }
  }
  return o["exit_code"] === 2 ? "deny" : null;
}

function outcome(
  s: ProjectionState,
  env: { seq: number; turn: string; attempt: number },
  dedupeKey: string,
  o: Omit<DecisionOutcome, "seq" | "turn" | "attempt" | "abandoned" | "source"> & { source: DecisionSource },
): void {
  if (s.cursor.outcomeKeys[dedupeKey] !== undefined) return;
  s.cursor.outcomeKeys[dedupeKey] = env.seq;
  const ti = s.cursor.turnIndex[env.turn];
  let abandoned = false;
  if (ti !== undefined) {
    const t = s.view.turns[ti]!;
    const i = findAttempt(t, env.attempt);
    abandoned = i >= 0 && t.attempts[i]!.status === "abandoned";
  }
  if (ti !== undefined) (s.cursor.attemptOutcomes[`${ti}:${env.attempt}`] ??= []).push(s.decisions.outcomes.length);
  s.decisions.outcomes.push({ seq: env.seq, turn: env.turn, attempt: env.attempt, abandoned, ...o });
}

// ---- hub decisions ---------------------------------------------------------------------------

function decisionRequested(s: ProjectionState, env: ReducibleEnvelope): void {
  const d = dataOf("decision.requested", env.data);
  if (d === undefined) {
    malformed(s, env.kind);
    return;
  }
  if (s.cursor.requestIndex[d.requestId] !== undefined) return;
  const ti = s.cursor.turnIndex[env.turn];
  let abandoned = false;
  if (ti !== undefined) {
    const t = s.view.turns[ti]!;
    const i = findAttempt(t, env.attempt);
    abandoned = i >= 0 && t.attempts[i]!.status === "abandoned";
  }
  s.cursor.requestIndex[d.requestId] = s.decisions.requests.length;
  if (ti !== undefined) (s.cursor.attemptRequests[`${ti}:${env.attempt}`] ??= []).push(s.decisions.requests.length);
  s.decisions.requests.push({
    requestId: d.requestId,
    seq: env.seq,
    turn: env.turn,
    attempt: env.attempt,
    toolName: d.toolName ?? null,
    toolUseId: d.toolUseId ?? null,
    summary: d.summary ?? null,
    deadline: d.deadline ?? null,
    status: abandoned ? "abandoned" : "pending",
    decision: null,
    by: null,
    decidedSeq: null,
  });
  if (!abandoned) s.decisions.pending.push(d.requestId);
}

function decisionMade(s: ProjectionState, env: ReducibleEnvelope): void {
  const d = dataOf("decision.made", env.data);
  if (d === undefined) {
    malformed(s, env.kind);
    return;
  }
  const i = s.cursor.requestIndex[d.requestId];
  const r = i === undefined ? undefined : s.decisions.requests[i];
  if (r === undefined) s.decisions.unmatchedDecisions++;
  else if (r.decidedSeq !== null) return; // the first answer counts
  if (r !== undefined) {
    r.decision = d.decision;
    r.by = d.by ?? null;
    r.decidedSeq = env.seq;
    if (r.status === "pending") {
      r.status = "decided";
      s.decisions.pending = s.decisions.pending.filter((id) => id !== r.requestId);
    }
  }
  const where = r ?? { turn: env.turn, attempt: env.attempt };
  outcome(s, { seq: env.seq, turn: where.turn, attempt: where.attempt }, `hub|${d.requestId}`, {
    source: "hub",
    toolUseId: r?.toolUseId ?? null,
    toolName: r?.toolName ?? null,
    decision: d.decision,
    by: d.by ?? null,
    reason: d.reason ?? null,
    requestId: d.requestId,
  });
}

