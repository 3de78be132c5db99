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

function resultLine(r: ToolResult, max: number): string {
  return `${r.isError ? "Tool Result (error)" : "Tool Result"}: ${capText(r.text, max)}`;
}

/** A run as readable text: assistant text, tool calls and their results, the final result. */
export function renderText(lines: LinesInput | Fold, opts?: RenderOptions): string {
  const fold = isFold(lines) ? lines : foldMessages(lines);
  const lim = limits(opts);
  const out: string[] = [];
  const calls = fold.toolCalls;
  const renderMessages = (messages: FoldedMessage[], indent: string): void => {
    for (const m of messages) {
      for (const b of m.blocks) {
        const type = String(b["type"]);
        if (silentBlocks.has(type)) continue;
        if (type === "text") {
          const text = typeof b["text"] === "string" ? b["text"] : "";
          if (text === "") continue;
          out.push(indent + (m.role === "user" ? `User: ${text}` : text));
        } else if (type === "tool_use") {
          const name = typeof b["name"] === "string" ? b["name"] : "";
          out.push(`${indent}Tool Called: ${name}(${capText(inputJson(b["input"]), lim.input)})`);
          const sub = typeof b["id"] === "string" ? calls.get(b["id"])?.subagent : undefined;
          if (lim.subagents && sub !== undefined) renderMessages(sub, indent + "  ");
        } else if (type === "tool_result") {
          const id = b["tool_use_id"];
          const r = typeof id === "string" ? calls.get(id)?.result : undefined;
          if (r !== undefined && r.lineIndex === m.lineIndexes[0]) out.push(indent + resultLine(r, lim.result));
          else out.push(indent + resultLine(orphan(b, m), lim.result));
        } else {
          out.push(`${indent}[${type} block]`);
        }
      }
      if (m.error !== undefined && !m.blocks.some((b) => b["type"] === "text"))
        out.push(`${indent}[API error: ${m.error}]`);
    }
  };
  renderMessages(fold.messages, "");
  return out.join("\n");
}

function orphan(b: Obj, m: FoldedMessage): ToolResult {
  const content = b["content"];
  return {
    toolUseId: String(b["tool_use_id"]),
    content,
    text: typeof content === "string" ? content : JSON.stringify(content ?? ""),
    isError: b["is_error"] === true,
    lineIndex: m.lineIndexes[0] ?? -1,
  };
}

function isFold(v: unknown): v is Fold {
  return (
    typeof v === "object" && v !== null && "toolCalls" in v && "messages" in v && (v as Fold).toolCalls instanceof Map
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
  for (const m of fold.messages) {
    if (m.role === "user") {
      // Tool results are placed right after the assistant message that called them.
      const texts = m.blocks
        .filter((b) => b["type"] === "text" && typeof b["text"] === "string")
        .map((b) => b["text"] as string);
      if (texts.length > 0) out.push({ role: "user", content: texts.join("\n") });
      continue;
    }
    const textParts: string[] = [];
    for (const b of m.blocks) {
      const type = String(b["type"]);
      if (type === "text" && typeof b["text"] === "string") textParts.push(b["text"]);
      else if (type !== "tool_use" && !silentBlocks.has(type)) textParts.push(`[${type} block]`);
    }
    if (m.error !== undefined && textParts.length === 0) textParts.push(`[API error: ${m.error}]`);
    const content: Array<AiSdkTextPart | AiSdkToolCallPart> = [];
    if (textParts.length > 0) content.push({ type: "text", text: textParts.join("\n") });
    for (const c of m.toolCalls) {
      const json = inputJson(c.input);
      const input = json.length > lim.input ? capText(json, lim.input) : (c.input ?? {});
      content.push({ type: "tool-call", toolCallId: c.id, toolName: c.name, input });
    }
    if (content.length === 0) continue;
    out.push({ role: "assistant", content });
    const results = m.toolCalls
      .filter((c): c is ToolCall & { result: ToolResult } => c.result !== undefined)
      .sort((a, b) => a.result.lineIndex - b.result.lineIndex);
    if (results.length > 0) {
      out.push({
        role: "tool",
        content: results.map((c) => ({
          type: "tool-result",
          toolCallId: c.id,
          toolName: c.name,
          output: { type: c.result.isError ? "error-text" : "text", value: capText(c.result.text, lim.result) },
        })),
      });
    }
  }
  return out;
}
