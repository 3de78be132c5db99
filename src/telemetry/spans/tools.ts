// The tool-span table: one `execute_tool <name>` span per tool call, the child of the attempt span
// or, for a subagent's call, of the Task/Agent call that spawned it. A call ends at its result; a
// background task runs on after its result and ends at the task's notification instead.
import {
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import { isObj, objField, stringField, type Obj } from "../../kernel/index.ts";
import { toolResultText } from "../../protocol/index.ts";
import { GENAI, toolSpanName } from "./names.ts";
import type { SpanText } from "./span-text.ts";

interface OpenTool {
  readonly id: string;
  readonly name: string;
  readonly span: Span;
  background: boolean;
  resultSeen: boolean;
}

export interface ToolSpansOptions {
  readonly tracer: Tracer;
  /** The attempt span's context: tool spans without a parent call are its children. */
  readonly attemptContext: Context;
  readonly text: SpanText;
  /** Record tool arguments and error texts (scrubbed, capped). */
  readonly captureContent: boolean;
}

export class ToolSpans {
  readonly #options: ToolSpansOptions;
  // Open calls only: an ended span leaves the map, so a long run does not hold every span it made
  // (held spans all reach the old generation, and GC time grows with the run).
  readonly #open = new Map<string, OpenTool>();
  /** Ids of ended calls: a call printed again after its result makes no second span. */
  readonly #ended = new Set<string>();
  #started = 0;

  constructor(options: ToolSpansOptions) {
    this.#options = options;
  }

  /** Tool spans started so far. */
  get started(): number {
    return this.#started;
  }

  /** The span of an open call, for events about it. */
  spanOf(id: string | undefined): Span | undefined {
    return id === undefined ? undefined : this.#open.get(id)?.span;
  }

  /** A tool_use block of an assistant line; `parentCallId` is the line's parent_tool_use_id. */
  start(block: Obj, parentCallId: string | undefined, at: number): void {
    const id = stringField(block, "id");
    if (id === undefined || this.#open.has(id) || this.#ended.has(id)) return;
    const { tracer, attemptContext, text, captureContent } = this.#options;
    const name = stringField(block, "name") ?? "unknown";
    const parent = parentCallId === undefined ? undefined : this.#open.get(parentCallId);
    const context = parent === undefined ? attemptContext : trace.setSpan(attemptContext, parent.span);
    // Literal keys (the GENAI names): computed keys in a literal are defined one by one, slower.
    const attributes: Attributes = {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": name,
      "gen_ai.tool.call.id": id,
    };
    if (parentCallId !== undefined) attributes["turnstream.tool.parent_call_id"] = parentCallId;
    if (captureContent && block["input"] !== undefined)
      attributes[GENAI.toolArguments] = text(JSON.stringify(block["input"]), GENAI.toolArguments);
    const span = tracer.startSpan(toolSpanName(name), { kind: SpanKind.INTERNAL, startTime: at, attributes }, context);
    this.#started++;
    this.#open.set(id, { id, name, span, background: false, resultSeen: false });
  }

  /** A tool_result block of a user line (`line` carries the permission decisions, tool_result_meta). */
  onResult(block: Obj, line: Obj, at: number): void {
    const tool = this.#openFor(block);
    if (tool === undefined) return;
    tool.resultSeen = true;
    const meta = resultMeta(line, tool.id);
    const decision = objField(meta, "permission_decision");
    const source = stringField(decision, "source");
    if (source !== undefined) tool.span.setAttribute("turnstream.tool.permission.source", source);
    if (block["is_error"] === true) {
      const refused =
        stringField(decision, "decision") === "reject" || stringField(meta, "non_execution_kind") !== undefined;
      fail(tool, refused ? "permission_denied" : "tool_error", this.#errorMessage(tool, block, refused, source));
    }
    if (tool.background) tool.span.addEvent("tool_result", { "turnstream.tool.background": true }, at);
    else this.#end(tool, at);
  }

  /** system/task_started: the call started a subagent task, maybe in the background. */
  onTaskStarted(line: Obj, at: number): void {
    const tool = this.#openFor(line);
    if (tool === undefined) return;
    const background = line["is_backgrounded"] === true;
    if (background) tool.background = true;
    const attributes: Attributes = { "turnstream.task.background": background };
    const taskId = stringField(line, "task_id");
    if (taskId !== undefined) attributes["turnstream.task.id"] = taskId;
    const subagentType = stringField(line, "subagent_type");
    if (subagentType !== undefined) attributes["turnstream.task.subagent_type"] = subagentType;
    tool.span.addEvent("task_started", attributes, at);
  }

  /** system/task_notification: the call's task completed, failed or was stopped; a background call ends here. */
  onTaskNotification(line: Obj, at: number): void {
    const tool = this.#openFor(line);
    if (tool === undefined) return;
    const status = stringField(line, "status");
    tool.span.addEvent("task_notification", status === undefined ? {} : { "turnstream.task.status": status }, at);
    if (status !== undefined && status !== "completed") fail(tool, `task_${status}`, `background task ${status}`);
    if (tool.background) this.#end(tool, at);
  }

  /** The attempt ended: every open call ends with it, marked incomplete. */
  endAll(at: number): void {
    for (const tool of this.#open.values()) {
      tool.span.setAttribute("turnstream.tool.incomplete", true);
      // A background task whose call has returned was still running, which is no error of the call.
      if (!tool.background || !tool.resultSeen) fail(tool, "incomplete", "the attempt ended before the tool finished");
      this.#end(tool, at);
    }
  }

  /** The open call a tool_result block or task line is about (its tool_use_id). */
  #openFor(blockOrLine: Obj): OpenTool | undefined {
    const id = stringField(blockOrLine, "tool_use_id");
    return id === undefined ? undefined : this.#open.get(id);
  }

  #end(tool: OpenTool, at: number): void {
    tool.span.end(at);
    this.#open.delete(tool.id);
    this.#ended.add(tool.id);
  }

  #errorMessage(tool: OpenTool, block: Obj, refused: boolean, source: string | undefined): string {
    if (this.#options.captureContent) return this.#options.text(toolResultText(block["content"]), "tool_result");
    if (!refused) return `${tool.name} returned an error`;
    return `${tool.name} was refused${source === undefined ? "" : ` (${source})`}`;
  }
}

function fail(tool: OpenTool, errorType: string, message: string): void {
  tool.span.setAttribute(GENAI.errorType, errorType);
  tool.span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/** The line's tool_result_meta entry for one call: how its permission was decided. */
function resultMeta(line: Obj, id: string): Obj | undefined {
  const metas = line["tool_result_meta"];
  if (!Array.isArray(metas)) return undefined;
  for (const meta of metas) if (isObj(meta) && meta["id"] === id) return meta;
  return undefined;
}
