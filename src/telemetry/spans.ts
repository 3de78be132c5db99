// Spans from an attempt's event stream: one `invoke_agent claude-code` span per attempt, an
// `execute_tool <name>` child per tool call (subagent calls nested under the Task/Agent call that
// spawned them), span events for API retries, hooks, permission denials and stderr. Every timestamp
// is an envelope's `at`, so feeding the same envelopes again (a re-export from the log) reproduces
// the timing exactly. Attribute names follow the OpenTelemetry GenAI semantic conventions.
//
// Nothing here records exceptions: a stack is raw text. Error status messages and event texts are
// scrubbed here and again by the RedactingSpanExporter.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from "@opentelemetry/api";
import type { AttemptContext, AttemptObserver, EventObserver } from "../events/index.ts";
import { RunClassifier, toolResultText, type ParsedLine } from "../protocol/index.ts";
import type { Scrubber } from "./scrub.ts";
import { contextFromTraceparent, type TraceIds } from "./trace-context.ts";

/** The envelope fields spans read; a structural subset of the event log's envelope. */
export interface EnvelopeLike {
  readonly kind: string;
  /** ISO time. Missing or unreadable → now (so stamp `at` before feeding, for reproducible timing). */
  readonly at?: string | undefined;
  readonly turn?: string | undefined;
  readonly attempt?: number | undefined;
  readonly session?: string | undefined;
  readonly seq?: number | undefined;
  readonly data?: unknown;
  readonly trace?: unknown;
}

export type TimeLike = string | number | Date;

export interface AttemptSpansOptions {
  tracer: Tracer;
  /** Scrubs text the spans export (sink "span"); `scrub` wins when both are given. */
  scrubber?: Scrubber;
  scrub?: (text: string, field: string) => string;
  session: string;
  turn: string;
  attempt: number;
  /** The producer's context; the attempt span becomes its child. Wins over `traceparent`. */
  parentContext?: Context;
  /** The producer's W3C traceparent (from the job). Ignored when malformed. */
  traceparent?: string;
  /** Start of the attempt span: pass the `at` of the attempt.started event. Default now. */
  startTime?: TimeLike;
  /** Model the turn asked for (else taken from system/init). */
  requestModel?: string;
  /**
   * Record tool arguments (`gen_ai.tool.call.arguments`) and tool error texts, scrubbed and capped.
   * Off by default: the GenAI conventions make content opt-in, and arguments carry user data.
   */
  captureContent?: boolean;
  /** Cap for recorded texts (characters). Default 1024. */
  maxContentChars?: number;
}

export interface AttemptOutcome {
  /** Error kind (`rate_limit`, `lost_session`, `timeout`, …); omitted → derived from the events. */
  errorKind?: string;
  /** Human message for the status; scrubbed and capped before use. */
  message?: string;
  /** End time; default the latest envelope's `at`. */
  at?: TimeLike;
}

export interface AttemptSpans {
  /**
   * Feed every envelope of the attempt, in log order. Terminal kinds (turn.finished, turn.failed,
   * attempt.abandoned) end the spans. For a `cli.line`, pass the protocol's parse of its raw text
   * when you have it (the worker does: the CLI runner parses every line): it is then not parsed again.
   */
  onEnvelope(env: EnvelopeLike, parsed?: ParsedLine): void;
  /** Ends open tool spans (marked incomplete) and the attempt span. Idempotent. */
  end(outcome?: AttemptOutcome): void;
  /** What the attempt's events carry as `data.trace` (at least attempt.started). */
  traceIds(): TraceIds;
  /** Context of the attempt span, for the worker's own child spans. */
  readonly context: Context;
  readonly ended: boolean;
  /** Spans started so far (attempt + tools). */
  spanCount(): number;
}

/** GenAI semantic-convention attribute names we set. */
export const GENAI = {
  operation: "gen_ai.operation.name",
  provider: "gen_ai.provider.name",
  agentName: "gen_ai.agent.name",
  conversationId: "gen_ai.conversation.id",
  requestModel: "gen_ai.request.model",
  responseModel: "gen_ai.response.model",
  responseId: "gen_ai.response.id",
  finishReasons: "gen_ai.response.finish_reasons",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  cacheReadTokens: "gen_ai.usage.cache_read.input_tokens",
  cacheCreationTokens: "gen_ai.usage.cache_creation.input_tokens",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  toolArguments: "gen_ai.tool.call.arguments",
  errorType: "error.type",
} as const;

export const AGENT_NAME = "claude-code";
export const ATTEMPT_SPAN_NAME = `invoke_agent ${AGENT_NAME}`;
export const toolSpanName = (tool: string): string => `execute_tool ${tool}`;

/** Kinds that end an attempt's spans when fed. */
export const ATTEMPT_END_KINDS: readonly string[] = ["turn.finished", "turn.failed", "turn.cancelled", "attempt.abandoned"];

const MAX_STDERR_EVENTS = 20;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const str = (o: Obj | undefined, k: string): string | undefined => (typeof o?.[k] === "string" ? (o[k] as string) : undefined);
const num = (o: Obj | undefined, k: string): number | undefined => (typeof o?.[k] === "number" && Number.isFinite(o[k]) ? (o[k] as number) : undefined);

let lastAtText = "";
let lastAtMs = Number.NaN;

export function toMillis(t: TimeLike | undefined): number | undefined {
  if (t === undefined) return undefined;
  // Consecutive events often share a millisecond stamp: skip re-parsing it.
  if (t === lastAtText) return lastAtMs;
  if (t instanceof Date) return Number.isNaN(t.getTime()) ? undefined : t.getTime();
  if (typeof t === "number") return Number.isFinite(t) ? t : undefined;
  const ms = Date.parse(t);
  if (Number.isNaN(ms)) return undefined;
  lastAtText = t;
  lastAtMs = ms;
  return ms;
}

const cap = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max)}… [${text.length - max} more characters]`);

// Cheap tests on the raw text decide whether a line needs JSON.parse at all: most lines of a long
// run are assistant text and tool output, and spans only need tool calls, results, system lines and
// results. Inside JSON text an unescaped `"` cannot occur within a string, so these key sequences
// only match real structure (a false positive merely costs one parse).
const MODEL_FIELD = /"model":"([^"\\]{1,200})"/;
const TOOL_USE_ID_KEY = '"tool_use_id":"';

interface ToolState {
  readonly span: Span;
  readonly name: string;
  readonly id: string;
  ended: boolean;
  /** A background task runs on after the tool's result; its span ends at the task's notification. */
  background: boolean;
  resultSeen: boolean;
}

interface Usage {
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
}

function modelUsageTotals(mu: unknown): Usage | undefined {
  if (!isObj(mu)) return undefined;
  const u: Usage = { input: 0, output: 0, cacheRead: 0, cacheCreation: 0 };
  let any = false;
  for (const m of Object.values(mu)) {
    if (!isObj(m)) continue;
    any = true;
    u.input += num(m, "inputTokens") ?? 0;
    u.output += num(m, "outputTokens") ?? 0;
    u.cacheRead += num(m, "cacheReadInputTokens") ?? 0;
    u.cacheCreation += num(m, "cacheCreationInputTokens") ?? 0;
  }
  return any ? u : undefined;
}

export function createAttemptSpans(options: AttemptSpansOptions): AttemptSpans {
  const { tracer, scrubber } = options;
  const captureContent = options.captureContent === true;
  const maxChars = options.maxContentChars ?? 1024;
  const scrubText = options.scrub ?? ((text: string, field: string): string => scrubber?.scrub(text, { sink: "span", field }) ?? text);
  const scrub = (text: string, field: string): string => cap(scrubText(text, field), maxChars);

  const parent = options.parentContext ?? contextFromTraceparent(options.traceparent) ?? ROOT_CONTEXT;
  const startMs = toMillis(options.startTime) ?? Date.now();
  const attrs: Attributes = {
    [GENAI.operation]: "invoke_agent",
    [GENAI.provider]: "anthropic",
    [GENAI.agentName]: AGENT_NAME,
    "turnstream.session": options.session,
    "turnstream.turn": options.turn,
    "turnstream.attempt": options.attempt,
  };
  if (options.requestModel !== undefined) attrs[GENAI.requestModel] = options.requestModel;
  // CLIENT: the agent runs in another process (the CLI), which the conventions call a remote agent.
  const root = tracer.startSpan(ATTEMPT_SPAN_NAME, { kind: SpanKind.CLIENT, startTime: startMs, attributes: attrs }, parent);
  const rootCtx = trace.setSpan(parent, root);
  const parentSc = trace.getSpanContext(parent);
  const ids: TraceIds = {
    traceId: root.spanContext().traceId,
    spanId: root.spanContext().spanId,
    ...(parentSc !== undefined && trace.isSpanContextValid(parentSc) ? { parentSpanId: parentSc.spanId } : {}),
  };

  // Open tool calls only: an ended span leaves the map, so a long run does not hold every span it
  // made (keeping them promoted them all to the old generation, and GC time grew with the run).
  const tools = new Map<string, ToolState>();
  const endedTools = new Set<string>();
  const classifier = new RunClassifier();
  let spans = 1;
  let lastMs = startMs;
  let ended = false;
  let requestModel = options.requestModel;
  let responseModel: string | undefined;
  let conversationId: string | undefined;
  let results = 0;
  let usage: Usage | undefined;
  let summedUsage: Usage | undefined;
  let apiRetries = 0;
  let stderrLines = 0;
  let sawExit = false;
  let resultErrorText: string | undefined;
  let failure: { kind?: string; message?: string } | undefined;

  const setRoot = (k: string, v: string | number | boolean | string[] | undefined): void => {
    if (v !== undefined) root.setAttribute(k, v);
  };

  function startTool(block: Obj, parentToolUseId: string | undefined, at: number): void {
    const id = str(block, "id");
    const name = str(block, "name") ?? "unknown";
    if (id === undefined || tools.has(id) || endedTools.has(id)) return;
    const parentTool = parentToolUseId === undefined ? undefined : tools.get(parentToolUseId);
    const ctx = parentTool === undefined ? rootCtx : trace.setSpan(rootCtx, parentTool.span);
    // Literal keys (the GENAI names): computed keys in a literal are defined one by one, slower.
    const a: Attributes = { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": id };
    if (parentToolUseId !== undefined) a["turnstream.tool.parent_call_id"] = parentToolUseId;
    if (captureContent && block["input"] !== undefined) a[GENAI.toolArguments] = scrub(JSON.stringify(block["input"]), GENAI.toolArguments);
    const span = tracer.startSpan(toolSpanName(name), { kind: SpanKind.INTERNAL, startTime: at, attributes: a }, ctx);
    spans++;
    tools.set(id, { span, name, id, ended: false, background: false, resultSeen: false });
  }

  function endTool(t: ToolState, at: number): void {
    if (t.ended) return;
    t.ended = true;
    t.span.end(at);
    tools.delete(t.id);
    endedTools.add(t.id);
  }

  function failTool(t: ToolState, errorType: string, message: string): void {
    t.span.setAttribute(GENAI.errorType, errorType);
    t.span.setStatus({ code: SpanStatusCode.ERROR, message });
  }

  function onToolResult(block: Obj, line: Obj, at: number): void {
    const id = str(block, "tool_use_id");
    const t = id === undefined ? undefined : tools.get(id);
    if (t === undefined || t.ended) return;
    t.resultSeen = true;
    const meta = Array.isArray(line["tool_result_meta"]) ? line["tool_result_meta"].find((m) => isObj(m) && m["id"] === id) : undefined;
    const decision = isObj(meta) && isObj(meta["permission_decision"]) ? meta["permission_decision"] : undefined;
    const source = str(decision, "source");
    if (source !== undefined) t.span.setAttribute("turnstream.tool.permission.source", source);
    const refused = str(decision, "decision") === "reject" || (isObj(meta) && typeof meta["non_execution_kind"] === "string");
    if (block["is_error"] === true) {
      const kind = refused ? "permission_denied" : "tool_error";
      const message = captureContent
        ? scrub(toolResultText(block["content"]), "tool_result")
        : refused
          ? `${t.name} was refused${source === undefined ? "" : ` (${source})`}`
          : `${t.name} returned an error`;
      failTool(t, kind, message);
    }
    if (t.background) {
      t.span.addEvent("tool_result", { "turnstream.tool.background": true }, at);
      return;
    }
    endTool(t, at);
  }

  function onSystem(o: Obj, subtype: string, at: number): void {
    switch (subtype) {
      case "init": {
        conversationId ??= str(o, "session_id");
        requestModel ??= str(o, "model");
        setRoot(GENAI.conversationId, conversationId);
        setRoot(GENAI.requestModel, requestModel);
        setRoot("turnstream.cli.version", str(o, "claude_code_version"));
        return;
      }
      case "api_retry": {
        apiRetries++;
        const a: Attributes = {};
        const n = num(o, "attempt");
        if (n !== undefined) a["turnstream.retry.attempt"] = n;
        const max = num(o, "max_retries");
        if (max !== undefined) a["turnstream.retry.max_retries"] = max;
        const delay = num(o, "retry_delay_ms");
        if (delay !== undefined) a["turnstream.retry.delay_ms"] = delay;
        const status = num(o, "error_status");
        if (status !== undefined) a["http.response.status_code"] = status;
        const err = o["error"];
        if (typeof err === "string") a[GENAI.errorType] = scrub(err, GENAI.errorType);
        else if (isObj(err) && typeof err["type"] === "string") a[GENAI.errorType] = scrub(err["type"], GENAI.errorType);
        root.addEvent("api_retry", a, at);
        return;
      }
      case "hook_started":
      case "hook_response": {
        const a: Attributes = {};
        for (const k of ["hook_name", "hook_event", "hook_id", "outcome"]) {
          const v = str(o, k);
          if (v !== undefined) a[`turnstream.hook.${k === "hook_name" ? "name" : k === "hook_event" ? "event" : k === "hook_id" ? "id" : k}`] = scrub(v, k);
        }
        const code = num(o, "exit_code");
        if (code !== undefined) a["turnstream.hook.exit_code"] = code;
        root.addEvent(subtype, a, at);
        return;
      }
      case "permission_denied": {
        const id = str(o, "tool_use_id");
        const a: Attributes = {};
        const name = str(o, "tool_name");
        if (name !== undefined) a[GENAI.toolName] = name;
        if (id !== undefined) a[GENAI.toolCallId] = id;
        const msg = str(o, "message");
        if (msg !== undefined) a["turnstream.permission.message"] = scrub(msg, "message");
        const t = id === undefined ? undefined : tools.get(id);
        (t !== undefined && !t.ended ? t.span : root).addEvent("permission_denied", a, at);
        return;
      }
      case "task_started": {
        const id = str(o, "tool_use_id");
        const t = id === undefined ? undefined : tools.get(id);
        if (t === undefined || t.ended) return;
        if (o["is_backgrounded"] === true) t.background = true;
        const a: Attributes = { "turnstream.task.background": o["is_backgrounded"] === true };
        const taskId = str(o, "task_id");
        if (taskId !== undefined) a["turnstream.task.id"] = taskId;
        const type = str(o, "subagent_type");
        if (type !== undefined) a["turnstream.task.subagent_type"] = type;
        t.span.addEvent("task_started", a, at);
        return;
      }
      case "task_notification": {
        const id = str(o, "tool_use_id");
        const t = id === undefined ? undefined : tools.get(id);
        if (t === undefined || t.ended) return;
        const status = str(o, "status");
        t.span.addEvent("task_notification", status === undefined ? {} : { "turnstream.task.status": status }, at);
        if (status !== undefined && status !== "completed") failTool(t, "task_" + status, `background task ${status}`);
        if (t.background) endTool(t, at);
        return;
      }
      default:
        return;
    }
  }

  function onResult(o: Obj): void {
    results++;
    setRoot("turnstream.result_count", results);
    conversationId ??= str(o, "session_id");
    setRoot(GENAI.conversationId, conversationId);
    // modelUsage is cumulative over the CLI process (main loop and subagents); `usage` is this
    // result's main loop only, so it is summed as the fallback.
    const mu = modelUsageTotals(o["modelUsage"]);
    if (mu !== undefined) {
      usage = mu;
      if (responseModel === undefined) {
        const first = Object.keys(o["modelUsage"] as Obj)[0];
        if (first !== undefined) responseModel = first;
      }
    }
    const u = isObj(o["usage"]) ? o["usage"] : undefined;
    if (u !== undefined) {
      summedUsage ??= { input: 0, output: 0, cacheRead: 0, cacheCreation: 0 };
      summedUsage.input += num(u, "input_tokens") ?? 0;
      summedUsage.output += num(u, "output_tokens") ?? 0;
      summedUsage.cacheRead += num(u, "cache_read_input_tokens") ?? 0;
      summedUsage.cacheCreation += num(u, "cache_creation_input_tokens") ?? 0;
    }
    const best = usage ?? summedUsage;
    if (best !== undefined) {
      // The GenAI conventions count cached prompt tokens inside gen_ai.usage.input_tokens; the API
      // (and the CLI) report them apart, so input = uncached + cache reads + cache writes, and the
      // two cache counts are also given on their own.
      root.setAttribute(GENAI.inputTokens, best.input + best.cacheRead + best.cacheCreation);
      root.setAttribute(GENAI.outputTokens, best.output);
      root.setAttribute(GENAI.cacheReadTokens, best.cacheRead);
      root.setAttribute(GENAI.cacheCreationTokens, best.cacheCreation);
    }
    setRoot(GENAI.responseModel, responseModel);
    const cost = num(o, "total_cost_usd");
    if (cost !== undefined) root.setAttribute("turnstream.cost.usd", cost);
    const turns = num(o, "num_turns");
    if (turns !== undefined) root.setAttribute("turnstream.num_turns", turns);
    const stop = str(o, "stop_reason");
    if (stop !== undefined) root.setAttribute(GENAI.finishReasons, [stop]);
    const terminal = str(o, "terminal_reason");
    if (terminal !== undefined) root.setAttribute("turnstream.terminal_reason", terminal);
    const status = num(o, "api_error_status");
    if (status !== undefined) root.setAttribute("http.response.status_code", status);
    const denials = Array.isArray(o["permission_denials"]) ? o["permission_denials"] : [];
    for (const d of denials) {
      if (!isObj(d)) continue;
      const a: Attributes = {};
      const name = str(d, "tool_name");
      if (name !== undefined) a[GENAI.toolName] = name;
      const id = str(d, "tool_use_id");
      if (id !== undefined) a[GENAI.toolCallId] = id;
      if (captureContent && d["tool_input"] !== undefined) a[GENAI.toolArguments] = scrub(JSON.stringify(d["tool_input"]), GENAI.toolArguments);
      root.addEvent("permission_denial", a, lastMs);
    }
    if (o["is_error"] === true || (str(o, "subtype") ?? "").startsWith("error")) {
      const errs = Array.isArray(o["errors"]) ? o["errors"].map((e) => (typeof e === "string" ? e : JSON.stringify(e))).join("; ") : "";
      resultErrorText = str(o, "result") ?? (errs !== "" ? errs : undefined);
    } else {
      resultErrorText = undefined;
    }
  }

  function onLine(raw: string, at: number): void {
    if (raw.startsWith('{"type":"assistant"')) {
      if (!raw.includes('"type":"tool_use"') && !raw.includes('"<synthetic>"')) {
        const m = MODEL_FIELD.exec(raw);
        if (m !== null && m[1] !== "<synthetic>") responseModel = m[1];
        return;
      }
    } else if (raw.startsWith('{"type":"user"')) {
      // Tool output is the bulk of a run's bytes: a successful result only needs its tool_use_id.
      if (!raw.includes('"type":"tool_result"')) return;
      // …unless it carries a failure or the permission decision (tool_result_meta) to record.
      if (!raw.includes('"is_error":true') && !raw.includes('"tool_result_meta"')) {
        for (let i = raw.indexOf(TOOL_USE_ID_KEY); i !== -1; i = raw.indexOf(TOOL_USE_ID_KEY, i + 1)) {
          const from = i + TOOL_USE_ID_KEY.length;
          const to = raw.indexOf('"', from);
          if (to > from) onToolResult({ tool_use_id: raw.slice(from, to) }, {}, at);
        }
        return;
      }
    } else if (raw.startsWith('{"type":"stream_event"') || raw.startsWith('{"type":"rate_limit_event"')) {
      return;
    }
    let o: unknown;
    try {
      o = JSON.parse(raw);
    } catch {
      return;
    }
    onObject(o, raw, at);
  }

  // Hot: runs for every line of a run. Indexed loops and one read per field: the parsed objects
  // have many shapes, so each property read is a slow (megamorphic) one.
  function onObject(o: unknown, raw: string, at: number, parsed?: ParsedLine): void {
    if (!isObj(o)) return;
    const type = o["type"];
    if (type === "assistant" || type === "result") {
      // The classifier only reads the parsed object; hand it one without re-parsing.
      classifier.add(parsed ?? ({ category: "unknown", raw, type, line: o } as ParsedLine));
      if (type === "result") return onResult(o);
      const msg = o["message"];
      if (!isObj(msg)) return;
      const model = msg["model"];
      if (typeof model === "string" && model !== "<synthetic>") responseModel = model;
      const content = msg["content"];
      if (!Array.isArray(content)) return;
      for (let i = 0; i < content.length; i++) {
        const b: unknown = content[i];
        if (isObj(b) && b["type"] === "tool_use") startTool(b, str(o, "parent_tool_use_id"), at);
      }
    } else if (type === "user") {
      const msg = o["message"];
      const content = isObj(msg) ? msg["content"] : undefined;
      if (!Array.isArray(content)) return;
      for (let i = 0; i < content.length; i++) {
        const b: unknown = content[i];
        if (isObj(b) && b["type"] === "tool_result") onToolResult(b, o, at);
      }
    } else if (type === "system") {
      onSystem(o, str(o, "subtype") ?? "", at);
    }
  }

  function textOf(data: unknown): string | undefined {
    if (typeof data === "string") return data;
    if (!isObj(data)) return undefined;
    for (const k of ["raw", "text", "line", "message"]) if (typeof data[k] === "string") return data[k] as string;
    return undefined;
  }

  function failureOf(data: unknown): { kind?: string; message?: string } {
    const out: { kind?: string; message?: string } = {};
    if (!isObj(data)) return out;
    const err = isObj(data["error"]) ? data["error"] : undefined;
    const kind = str(data, "errorKind") ?? str(data, "kind") ?? str(err, "kind") ?? str(data, "reason");
    const message = str(data, "message") ?? str(err, "message");
    if (kind !== undefined) out.kind = kind;
    if (message !== undefined) out.message = message;
    return out;
  }

  function end(outcome: AttemptOutcome = {}): void {
    if (ended) return;
    ended = true;
    const at = toMillis(outcome.at) ?? lastMs;
    setRoot(GENAI.responseModel, responseModel);
    if (apiRetries > 0) root.setAttribute("turnstream.api_retries", apiRetries);
    if (stderrLines > 0) root.setAttribute("turnstream.cli.stderr_lines", stderrLines);
    let kind = outcome.errorKind;
    let message = outcome.message;
    if (kind === undefined) {
      const k = results > 0 ? classifier.kind() : undefined;
      if (k !== undefined && k !== "ok") kind = k;
      else if (failure !== undefined) kind = failure.kind ?? "failed";
      else if (results === 0 && sawExit) kind = "no_result";
    }
    if (kind !== undefined && kind !== "ok") {
      message ??= failure?.message ?? resultErrorText ?? `attempt failed: ${kind}`;
      root.setAttribute(GENAI.errorType, kind);
      root.setStatus({ code: SpanStatusCode.ERROR, message: scrub(message, "status") });
    }
    for (const t of tools.values()) {
      if (t.ended) continue;
      t.span.setAttribute("turnstream.tool.incomplete", true);
      if (!t.background || !t.resultSeen) failTool(t, "incomplete", "the attempt ended before the tool finished");
      endTool(t, at);
    }
    root.end(at);
  }

  return {
    context: rootCtx,
    get ended() {
      return ended;
    },
    spanCount: () => spans,
    traceIds: () => ids,
    end,
    onEnvelope(env: EnvelopeLike, parsed?: ParsedLine): void {
      if (ended) return;
      const at = toMillis(env.at) ?? Date.now();
      if (at > lastMs) lastMs = at;
      switch (env.kind) {
        case "cli.line": {
          const raw = isObj(env.data) ? env.data["raw"] : undefined;
          if (typeof raw !== "string") return;
          // Only a parse of this very text stands in for parsing it; an invalid line has no object.
          if (parsed !== undefined && parsed.raw === raw && parsed.category !== "truncated") {
            if (parsed.category !== "invalid") onObject(parsed.line, raw, at, parsed);
          } else onLine(raw, at);
          return;
        }
        case "cli.stderr": {
          stderrLines++;
          const text = textOf(env.data);
          if (text !== undefined && stderrLines <= MAX_STDERR_EVENTS) root.addEvent("cli.stderr", { "turnstream.stderr": scrub(text, "stderr") }, at);
          return;
        }
        case "cli.exit": {
          sawExit = true;
          const d = isObj(env.data) ? env.data : undefined;
          const code = num(d, "code") ?? num(d, "exitCode");
          if (code !== undefined) root.setAttribute("turnstream.cli.exit_code", code);
          const signal = str(d, "signal");
          if (signal !== undefined) root.setAttribute("turnstream.cli.signal", signal);
          return;
        }
        case "attempt.started": {
          const d = isObj(env.data) ? env.data : undefined;
          const model = str(d, "model");
          if (model !== undefined && requestModel === undefined) {
            requestModel = model;
            root.setAttribute(GENAI.requestModel, model);
          }
          return;
        }
        case "turn.failed":
        case "attempt.abandoned":
        case "turn.cancelled": {
          const f = failureOf(env.data);
          if (f.kind === undefined) f.kind = env.kind === "turn.failed" ? "failed" : env.kind === "turn.cancelled" ? "cancelled" : "abandoned";
          failure = f;
          root.addEvent(env.kind, {}, at);
          end({ at });
          return;
        }
        case "turn.finished":
          end({ at });
          return;
        default:
          return;
      }
    },
  };
}


export interface AttemptSpansObserverOptions {
  tracer: Tracer;
  /** As in AttemptSpansOptions; default off. */
  captureContent?: boolean | undefined;
  /** Cap for recorded texts (characters). Default 1024. */
  maxContentChars?: number | undefined;
}

/** Spans as an observer of the worker's events: one attempt span (and its tool spans) per attempt. */
export function attemptSpansObserver(options: AttemptSpansObserverOptions): EventObserver {
  return {
    attempt(ctx: AttemptContext): AttemptObserver {
      const spans = createAttemptSpans({
        tracer: options.tracer,
        scrub: (text, field) => ctx.scrub(text, field),
        session: ctx.session,
        turn: ctx.turn,
        attempt: ctx.attempt,
        startTime: ctx.startedAt,
        ...(ctx.traceparent !== undefined ? { traceparent: ctx.traceparent } : {}),
        ...(ctx.requestModel !== undefined ? { requestModel: ctx.requestModel } : {}),
        ...(options.captureContent !== undefined ? { captureContent: options.captureContent } : {}),
        ...(options.maxContentChars !== undefined ? { maxContentChars: options.maxContentChars } : {}),
      });
      return {
        trace: spans.traceIds(),
        onEvent(event, parsed) {
          // A later attempt records an earlier one's abandonment: not this attempt's end.
          if (event.kind === "attempt.abandoned" && isObj(event.data) && event.data["attempt"] !== ctx.attempt) return;
          spans.onEnvelope(event, parsed);
        },
        end(reason) {
          if (!spans.ended) spans.end({ errorKind: reason });
        },
      };
    },
  };
}
