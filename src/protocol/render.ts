// Renderings of a run: a plain-text transcript and AI-SDK-style model messages. Thinking is never
// rendered; a block with no rendering leaves a line naming its type so nothing disappears silently.
import { foldMessages, type Fold, type FoldedMessage, type ToolCall, type ToolResult } from "./fold.ts";
import type { Obj } from "../kernel/index.ts";
import { capText, type LinesInput } from "./lines.ts";

export interface RenderOptions {
  /** Default 8000. */
  maxToolResultChars?: number;
  /** Default 30000. */
  maxToolInputChars?: number;
  /** Render subagent messages (indented) under the call that started them. Default true. */
  subagents?: boolean;
}

export const DEFAULT_MAX_TOOL_RESULT_CHARS = 8000;
export const DEFAULT_MAX_TOOL_INPUT_CHARS = 30000;

const silentBlocks = new Set(["thinking", "redacted_thinking"]);

function limits(opts: RenderOptions | undefined): { result: number; input: number; subagents: boolean } {
  return {
    result: opts?.maxToolResultChars ?? DEFAULT_MAX_TOOL_RESULT_CHARS,
    input: opts?.maxToolInputChars ?? DEFAULT_MAX_TOOL_INPUT_CHARS,
    subagents: opts?.subagents ?? true,
  };
}

function inputJson(input: unknown): string {
  return JSON.stringify(input ?? {}) ?? "{}";
}

function resultLine(result: ToolResult, max: number): string {
  return `${result.isError ? "Tool Result (error)" : "Tool Result"}: ${capText(result.text, max)}`;
}

/** A run as readable text: assistant text, tool calls and their results, the final result. */
export function renderText(lines: LinesInput | Fold, opts?: RenderOptions): string {
  const fold = isFold(lines) ? lines : foldMessages(lines);
  const lim = limits(opts);
  const out: string[] = [];
  const calls = fold.toolCalls;
  const renderMessages = (messages: FoldedMessage[], indent: string): void => {
    for (const message of messages) {
      for (const block of message.blocks) {
        const type = String(block["type"]);
        if (silentBlocks.has(type)) continue;
        if (type === "text") {
          const text = typeof block["text"] === "string" ? block["text"] : "";
          if (text === "") continue;
          out.push(indent + (message.role === "user" ? `User: ${text}` : text));
        } else if (type === "tool_use") {
          const name = typeof block["name"] === "string" ? block["name"] : "";
          out.push(`${indent}Tool Called: ${name}(${capText(inputJson(block["input"]), lim.input)})`);
          const sub = typeof block["id"] === "string" ? calls.get(block["id"])?.subagent : undefined;
          if (lim.subagents && sub !== undefined) renderMessages(sub, indent + "  ");
        } else if (type === "tool_result") {
          const id = block["tool_use_id"];
          const result = typeof id === "string" ? calls.get(id)?.result : undefined;
          if (result !== undefined && result.lineIndex === message.lineIndexes[0])
            out.push(indent + resultLine(result, lim.result));
          else out.push(indent + resultLine(orphan(block, message), lim.result));
        } else {
          out.push(`${indent}[${type} block]`);
        }
      }
      if (message.error !== undefined && !message.blocks.some((b) => b["type"] === "text"))
        out.push(`${indent}[API error: ${message.error}]`);
    }
  };
  renderMessages(fold.messages, "");
  return out.join("\n");
}

function orphan(block: Obj, message: FoldedMessage): ToolResult {
  const content = block["content"];
  return {
    toolUseId: String(block["tool_use_id"]),
    content,
    text: typeof content === "string" ? content : JSON.stringify(content ?? ""),
    isError: block["is_error"] === true,
    lineIndex: message.lineIndexes[0] ?? -1,
  };
}

function isFold(value: unknown): value is Fold {
  return (
    typeof value === "object" &&
    value !== null &&
    "toolCalls" in value &&
    "messages" in value &&
    (value as Fold).toolCalls instanceof Map
  );
}

// AI SDK (v5) ModelMessage shapes, declared here so the protocol layer needs no dependency.
export type AiSdkTextPart = { type: "text"; text: string };
export type AiSdkToolCallPart = { type: "tool-call"; toolCallId: string; toolName: string; input: unknown };
export type AiSdkToolResultPart = {
  type: "tool-result";
  toolCallId: string;
  toolName: string;
  output: { type: "text"; value: string } | { type: "error-text"; value: string };
};
export type AiSdkMessage =
  | { role: "user"; content: string }
  | { role: "assistant"; content: Array<AiSdkTextPart | AiSdkToolCallPart> }
  | { role: "tool"; content: AiSdkToolResultPart[] };

/** A run as AI-SDK-style messages (assistant text and tool-call parts, tool-result messages). */
export function toAiSdkMessages(lines: LinesInput | Fold, opts?: RenderOptions): AiSdkMessage[] {
  const fold = isFold(lines) ? lines : foldMessages(lines);
  const lim = limits(opts);
  const out: AiSdkMessage[] = [];
  for (const message of fold.messages) {
    if (message.role === "user") {
      // Tool results are placed right after the assistant message that called them.
      const texts = message.blocks
        .filter((b) => b["type"] === "text" && typeof b["text"] === "string")
        .map((b) => b["text"] as string);
      if (texts.length > 0) out.push({ role: "user", content: texts.join("\n") });
      continue;
    }
    const textParts: string[] = [];
    for (const block of message.blocks) {
      const type = String(block["type"]);
      if (type === "text" && typeof block["text"] === "string") textParts.push(block["text"]);
      else if (type !== "tool_use" && !silentBlocks.has(type)) textParts.push(`[${type} block]`);
    }
    if (message.error !== undefined && textParts.length === 0) textParts.push(`[API error: ${message.error}]`);
    const content: Array<AiSdkTextPart | AiSdkToolCallPart> = [];
    if (textParts.length > 0) content.push({ type: "text", text: textParts.join("\n") });
    for (const call of message.toolCalls) {
      const json = inputJson(call.input);
      const input = json.length > lim.input ? capText(json, lim.input) : (call.input ?? {});
      content.push({ type: "tool-call", toolCallId: call.id, toolName: call.name, input });
    }
    if (content.length === 0) continue;
    out.push({ role: "assistant", content });
    const results = message.toolCalls
      .filter((c): c is ToolCall & { result: ToolResult } => c.result !== undefined)
      .sort((a, b) => a.result.lineIndex - b.result.lineIndex);
    if (results.length > 0) {
      out.push({
        role: "tool",
        content: results.map((call) => ({
          type: "tool-result",
          toolCallId: call.id,
          toolName: call.name,
          output: { type: call.result.isError ? "error-text" : "text", value: capText(call.result.text, lim.result) },
        })),
      });
    }
  }
  return out;
}
