// One attempt's spans, built from its events in log order, as the worker writes them or as a
// re-export reads them back: an `invoke_agent claude-code` span for the attempt, with the tool spans
// under it (tools.ts), span events for the CLI's system lines (system-lines.ts), usage and cost from
// its result lines (results.ts), and its error status when it ends (outcome.ts). Every timestamp is
// an event's `at`, so feeding the same events again reproduces the timing exactly.
//
// Nothing here records exceptions: a stack is raw text. Texts are scrubbed here (span-text.ts) and
// again by the RedactingSpanExporter.
import {
  context as otelContext,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import {
  ATTEMPT_END_KINDS,
  dataOf,
  isEventKind,
  type AttemptContext,
  type AttemptObserver,
  type ObservedEvent,
  type TraceIds,
} from "../../events/index.ts";
import { isObj, objField, stringField, type Obj } from "../../kernel/index.ts";
import { objOf, parseLine, RunClassifier, type ParsedLine } from "../../protocol/index.ts";
import { contextFromTraceparent } from "../trace-context.ts";
import { ATTEMPT_SPAN_NAME, AGENT_NAME, GENAI } from "./names.ts";
import { attemptFailure, failureOfEndEvent, type Failure } from "./outcome.ts";
import { ResultAccounting, resultModel } from "./results.ts";
import { DEFAULT_MAX_CONTENT_CHARS, spanText, type SpanText } from "./span-text.ts";
import { apiRetryAttributes, hookAttributes, permissionDeniedAttributes } from "./system-lines.ts";
import { millisOf } from "./time.ts";
import { ToolSpans } from "./tools.ts";
import { sessionSpan, type EmitSpans } from "./session.ts";
import { modelCallSpan } from "./model-calls.ts";

export interface AttemptSpansOptions {
  tracer: Tracer;
  /**
   * Record tool arguments (`gen_ai.tool.call.arguments`) and tool error texts, scrubbed and capped.
   * Off by default: the GenAI conventions make content opt-in, and arguments carry user data.
   */
  captureContent?: boolean | undefined;
  /** Cap for recorded texts (characters). Default 1024. */
  maxContentChars?: number | undefined;
  /**
   * Where the session's own span goes when the attempt opens the session (AttemptContext.opensSession):
   * Telemetry.emit. Without it no session span is made.
   */
  emit?: EmitSpans | undefined;
}

/** The model name on the assistant lines the CLI makes up itself (API errors): no model answered them. */
const SYNTHETIC_MODEL = "<synthetic>";
/** stderr lines recorded as span events; the rest are only counted. */
const MAX_STDERR_EVENTS = 20;

export class AttemptSpans implements AttemptObserver {
  readonly trace: TraceIds;
  readonly attempt: number;
  readonly #root: Span;
  /** The attempt span's context (under the producer's trace): where its tools' spans start and its work runs. */
  readonly #context: Context;
  readonly #text: SpanText;
  readonly #tools: ToolSpans;
  readonly #results: ResultAccounting;
  readonly #classifier = new RunClassifier();
  readonly #tracer: Tracer;
  #modelCalls = 0;
  /** 1 when this attempt emitted its session's span. */
  #sessionSpans = 0;
  #lastMs: number;
  #ended = false;
  #requestModel: string | undefined;
  #responseModel: string | undefined;
  #conversationId: string | undefined;
  #apiRetries = 0;
  #stderrLines = 0;
  #exited = false;
  #endEvent: Failure | undefined;

  constructor(context: AttemptContext, options: AttemptSpansOptions) {
    const captureContent = options.captureContent === true;
    const session = contextFromTraceparent(context.sessionTraceparent);
    const producer = contextFromTraceparent(context.traceparent);
    const parent = producer ?? session ?? ROOT_CONTEXT;
    this.attempt = context.attempt;
    this.#lastMs = millisOf(context.startedAt) ?? Date.now();
    this.#requestModel = context.requestModel;
    this.#tracer = options.tracer;
    // CLIENT: the agent runs in another process (the CLI), which the conventions call a remote agent.
    this.#root = options.tracer.startSpan(
      ATTEMPT_SPAN_NAME,
      {
        kind: SpanKind.CLIENT,
        startTime: this.#lastMs,
        attributes: attemptAttributes(context),
        links: sessionLink(producer, session),
      },
      parent,
    );
    this.trace = attemptTraceIds(this.#root, parent);
    if (context.opensSession === true)
      this.#sessionSpans = emitSessionSpan(context, this.#root, this.#lastMs, options.emit) ? 1 : 0;
    this.#text = spanText(context.scrub, options.maxContentChars ?? DEFAULT_MAX_CONTENT_CHARS);
    this.#context = trace.setSpan(parent, this.#root);
    this.#tools = new ToolSpans({
      tracer: options.tracer,
      attemptContext: this.#context,
      text: this.#text,
      captureContent,
    });
    this.#results = new ResultAccounting(this.#root, this.#text, captureContent);
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Spans made so far: the attempt's, its tools' and its model calls', and the session's it emitted. */
  get spanCount(): number {
    return 1 + this.#tools.started + this.#modelCalls + this.#sessionSpans;
  }

  /** Runs `fn` with the attempt span active (a no-op without a registered context manager). */
  run<T>(fn: () => T): T {
    return otelContext.with(this.#context, fn);
  }

  /**
   * Every event of the attempt, in log order; an attempt-ending kind ends the spans. For a `cli.line`,
   * `parsed` is the protocol's parse of its text, when the caller has one.
   */
  onEvent(event: ObservedEvent, parsed?: ParsedLine): void {
    if (this.#ended) return;
    const at = millisOf(event.at) ?? Date.now();
    if (at > this.#lastMs) this.#lastMs = at;
    const kind = event.kind;
    if (kind === "cli.line") this.#onCliLine(event.data, parsed, at);
    else if (kind === "cli.stderr") this.#onStderr(event.data, at);
    else if (kind === "cli.exit") this.#onExit(event.data);
    else if (kind === "attempt.started") this.#onStarted(event.data);
    else if (kind === "model.call")
      this.#modelCalls += modelCallSpan(this.#tracer, this.#context, event.data, this.#text) ? 1 : 0;
    else if (isEventKind(kind) && ATTEMPT_END_KINDS.has(kind)) this.#onEndEvent(kind, event.data, at);
  }

  /**
   * Ends the spans of an attempt no attempt-ending event reached (fenced, crashed, stopped). With a
   * `reason` that is the attempt's error kind; without one (a re-export of an attempt whose end is not
   * in the log) the events decide.
   */
  end(reason?: string): void {
    if (!this.#ended) this.#finish(reason, this.#lastMs);
  }

  #onCliLine(data: unknown, parsed: ParsedLine | undefined, at: number): void {
    const raw = dataOf("cli.line", data)?.raw;
    if (raw === undefined) return;
    // Only a parse of this very text stands for it (the worker's line scrubber may have changed it).
    const line = parsed !== undefined && parsed.raw === raw ? parsed : parseLine(raw);
    const message = objOf(line);
    if (message === undefined) return;
    switch (message["type"]) {
      case "assistant":
        this.#classifier.add(line);
        return this.#onAssistant(message, at);
      case "user":
        return this.#onUser(message, at);
      case "system":
        return this.#onSystem(message, at);
      case "result":
        this.#classifier.add(line);
        return this.#onResult(message);
      default:
        return;
    }
  }

  #onAssistant(line: Obj, at: number): void {
    const message = objField(line, "message");
    const model = stringField(message, "model");
    if (model !== undefined && model !== SYNTHETIC_MODEL) this.#responseModel = model;
    const content = message?.["content"];
    if (!Array.isArray(content)) return;
    const parentCallId = stringField(line, "parent_tool_use_id");
    for (const block of content)
      if (isObj(block) && block["type"] === "tool_use") this.#tools.start(block, parentCallId, at);
  }

  #onUser(line: Obj, at: number): void {
    const content = objField(line, "message")?.["content"];
    if (!Array.isArray(content)) return;
    for (const block of content)
      if (isObj(block) && block["type"] === "tool_result") this.#tools.onResult(block, line, at);
  }

  #onSystem(line: Obj, at: number): void {
    const subtype = stringField(line, "subtype");
    switch (subtype) {
      case "init":
        return this.#onInit(line);
      case "api_retry":
        this.#apiRetries++;
        this.#root.addEvent(subtype, apiRetryAttributes(line, this.#text), at);
        return;
      case "hook_started":
      case "hook_response":
        this.#root.addEvent(subtype, hookAttributes(line, this.#text), at);
        return;
      case "permission_denied": {
        const span = this.#tools.spanOf(stringField(line, "tool_use_id")) ?? this.#root;
        span.addEvent(subtype, permissionDeniedAttributes(line, this.#text), at);
        return;
      }
      case "task_started":
        return this.#tools.onTaskStarted(line, at);
      case "task_notification":
        return this.#tools.onTaskNotification(line, at);
      default:
        return;
    }
  }

  #onInit(line: Obj): void {
    this.#conversationId ??= stringField(line, "session_id");
    this.#requestModel ??= stringField(line, "model");
    this.#setRoot(GENAI.conversationId, this.#conversationId);
    this.#setRoot(GENAI.requestModel, this.#requestModel);
    this.#setRoot("turnstream.cli.version", stringField(line, "claude_code_version"));
  }

  #onResult(line: Obj): void {
    this.#conversationId ??= stringField(line, "session_id");
    this.#setRoot(GENAI.conversationId, this.#conversationId);
    this.#responseModel ??= resultModel(line);
    this.#results.add(line, this.#lastMs);
    this.#setRoot(GENAI.responseModel, this.#responseModel);
  }

  #onStderr(data: unknown, at: number): void {
    this.#stderrLines++;
    const text = dataOf("cli.stderr", data)?.text;
    if (text !== undefined && this.#stderrLines <= MAX_STDERR_EVENTS)
      this.#root.addEvent("cli.stderr", { "turnstream.stderr": this.#text(text, "stderr") }, at);
  }

  #onExit(data: unknown): void {
    this.#exited = true;
    const exit = dataOf("cli.exit", data);
    this.#setRoot("turnstream.cli.exit_code", exit?.code ?? undefined);
    this.#setRoot("turnstream.cli.signal", exit?.signal ?? undefined);
  }

  #onStarted(data: unknown): void {
    const started = dataOf("attempt.started", data);
    this.#results.costBaseUsd = started?.costBaseUsd ?? 0;
    if (this.#requestModel !== undefined) return;
    this.#requestModel = started?.model;
    this.#setRoot(GENAI.requestModel, this.#requestModel);
  }

  #onEndEvent(kind: string, data: unknown, at: number): void {
    // A parked run ended as it should: its turn goes on in a later attempt.
    if (kind === "turn.parked") this.#root.addEvent(kind, {}, at);
    else if (kind !== "turn.finished") {
      // A later attempt records an earlier one's abandonment (its worker died): not this attempt's end.
      if (kind === "attempt.abandoned" && dataOf("attempt.abandoned", data)?.attempt !== this.attempt) return;
      this.#endEvent = failureOfEndEvent(kind, data);
      this.#root.addEvent(kind, {}, at);
    }
    this.#finish(undefined, at);
  }

  #finish(reason: string | undefined, at: number): void {
    this.#ended = true;
    this.#setRoot(GENAI.responseModel, this.#responseModel);
    if (this.#apiRetries > 0) this.#root.setAttribute("turnstream.api_retries", this.#apiRetries);
    if (this.#stderrLines > 0) this.#root.setAttribute("turnstream.cli.stderr_lines", this.#stderrLines);
    const failure = attemptFailure({
      reason,
      resultKind: this.#results.count > 0 ? this.#classifier.kind() : undefined,
      resultErrorText: this.#results.errorText,
      endEvent: this.#endEvent,
      exited: this.#exited,
    });
    if (failure !== undefined) {
      this.#root.setAttribute(GENAI.errorType, failure.kind);
      this.#root.setStatus({ code: SpanStatusCode.ERROR, message: this.#text(failure.message, "status") });
    }
    this.#tools.endAll(at);
    this.#root.end(at);
  }

  #setRoot(key: string, value: string | number | undefined): void {
    if (value !== undefined) this.#root.setAttribute(key, value);
  }
}

function attemptAttributes(context: AttemptContext): Attributes {
  const attributes: Attributes = {
    [GENAI.operation]: "invoke_agent",
    [GENAI.provider]: "anthropic",
    [GENAI.agentName]: AGENT_NAME,
    "turnstream.session": context.session,
    "turnstream.turn": context.turn,
    "turnstream.attempt": context.attempt,
  };
  if (context.requestModel !== undefined) attributes[GENAI.requestModel] = context.requestModel;
  return attributes;
}

/**
 * A producer's trace is the turn's; the session's trace is named by a link then, so a trace UI can go
 * from the turn to the rest of its session.
 */
function sessionLink(producer: Context | undefined, session: Context | undefined): Link[] | undefined {
  if (producer === undefined || session === undefined) return undefined;
  const sessionSpan = trace.getSpanContext(session);
  return sessionSpan === undefined
    ? undefined
    : [{ context: sessionSpan, attributes: { "turnstream.link": "session" } }];
}

/**
 * The session's span, once: by the session's first attempt, when there is a session trace and an
 * emit. Whether it went out.
 */
function emitSessionSpan(context: AttemptContext, root: Span, startMs: number, emit: EmitSpans | undefined): boolean {
  if (emit === undefined || context.sessionTraceparent === undefined) return false;
  const span = sessionSpan(context.session, context.sessionTraceparent, root, startMs);
  if (span !== undefined) emit([span]);
  return span !== undefined;
}

/** The attempt span's ids, and its parent's (the producer's span, or the session's). */
function attemptTraceIds(span: Span, parent: Context): TraceIds {
  const { traceId, spanId } = span.spanContext();
  const ids: TraceIds = { traceId, spanId };
  const parentSpan = trace.getSpanContext(parent);
  if (parentSpan !== undefined && trace.isSpanContextValid(parentSpan)) ids.parentSpanId = parentSpan.spanId;
  return ids;
}
