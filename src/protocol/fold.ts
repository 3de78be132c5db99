// Folds the per-block line stream into messages. The CLI prints one `assistant` line per content
// block, all sharing `message.id`; tool results arrive one per `user` line in completion order;
// a subagent's lines carry the `parent_tool_use_id` of the tool call that started it.
import type { ParsedLine } from "./parse.ts";
import { isObj, stringField, type Obj } from "../kernel/index.ts";
import { contentBlocks, objOf, parsedLines, toolResultText, type LinesInput } from "./lines.ts";

export interface ToolResult {
  toolUseId: string;
  content: unknown;
  /** Text of the content (text blocks joined). */
  text: string;
  isError: boolean;
  /** The line's `tool_use_result` (object on success, string on failure). */
  toolUseResult?: unknown;
  /** Index of the line that carried it. */
  lineIndex: number;
}

export interface ToolCall {
  id: string;
  name: string;
  input: unknown;
  parentToolUseId: string | null;
  /** Index of the line that carried the tool_use block. */
  lineIndex: number;
  result?: ToolResult;
  /** Messages of the subagent this call started (lines whose parent_tool_use_id is this id). */
  subagent?: FoldedMessage[];
}

export interface FoldedMessage {
  role: "assistant" | "user";
  /** `message.id` for assistant messages. */
  id?: string;
  model?: string;
  parentToolUseId: string | null;
  blocks: Obj[];
  toolCalls: ToolCall[];
  /** The synthetic API-error line's `error` field. */
  error?: string;
  /** Indexes of the lines folded into this message. */
  lineIndexes: number[];
}

export interface Fold {
  /** Top-level messages (no parent_tool_use_id), in order of first line. */
  messages: FoldedMessage[];
  /** Subagent messages by parent_tool_use_id. */
  subagents: Map<string, FoldedMessage[]>;
  /** Every tool call by id, in call order. */
  toolCalls: Map<string, ToolCall>;
  /** Results whose tool_use_id matched no call. */
  orphanResults: ToolResult[];
  /** Every `result` line (a run with background subagents prints several). */
  results: Obj[];
}

/** The run's lines folded into messages: per-block assistant lines joined by message id, tool calls paired with their results, subagent work grouped. */
export function foldMessages(lines: LinesInput): Fold {
  const fold: Fold = { messages: [], subagents: new Map(), toolCalls: new Map(), orphanResults: [], results: [] };
  const byMessageId = new Map<string, FoldedMessage>();
  let index = -1;
  const groupFor = (parent: string | null): FoldedMessage[] => {
    if (parent === null) return fold.messages;
    let g = fold.subagents.get(parent);
    if (g === undefined) {
      g = [];
      fold.subagents.set(parent, g);
      const call = fold.toolCalls.get(parent);
      if (call !== undefined) call.subagent = g;
    }
    return g;
  };

  for (const p of parsedLines(lines)) {
    index++;
    const o = objOf(p);
    if (o === undefined) continue;
    const type = o["type"];
    if (type === "result") {
      fold.results.push(o);
      continue;
    }
    if (type !== "assistant" && type !== "user") continue;
    const parent = stringField(o, "parent_tool_use_id") ?? null;
    const blocks = contentBlocks(o);
    if (type === "assistant") {
      const msg = isObj(o["message"]) ? o["message"] : {};
      const id = stringField(msg, "id");
      const key = id === undefined ? undefined : `${parent ?? ""}\u0000${id}`;
      let m = key === undefined ? undefined : byMessageId.get(key);
      if (m === undefined) {
        m = { role: "assistant", parentToolUseId: parent, blocks: [], toolCalls: [], lineIndexes: [] };
        if (id !== undefined) m.id = id;
        const model = stringField(msg, "model");
        if (model !== undefined) m.model = model;
        groupFor(parent).push(m);
        if (key !== undefined) byMessageId.set(key, m);
      }
      const err = stringField(o, "error");
      if (err !== undefined) m.error = err;
      m.lineIndexes.push(index);
      for (const b of blocks) {
        m.blocks.push(b);
        if (b["type"] === "tool_use" && typeof b["id"] === "string") {
          if (fold.toolCalls.has(b["id"])) continue; // the same block printed twice
          const call: ToolCall = {
            id: b["id"],
            name: typeof b["name"] === "string" ? b["name"] : "",
            input: b["input"],
            parentToolUseId: parent,
            lineIndex: index,
          };
          const sub = fold.subagents.get(call.id);
          if (sub !== undefined) call.subagent = sub;
          m.toolCalls.push(call);
          fold.toolCalls.set(call.id, call);
        }
      }
      continue;
    }
    // user line: tool results and/or text
    const m: FoldedMessage = { role: "user", parentToolUseId: parent, blocks, toolCalls: [], lineIndexes: [index] };
    groupFor(parent).push(m);
    const results = blocks.filter((b) => b["type"] === "tool_result" && typeof b["tool_use_id"] === "string");
    for (const b of results) {
      const r: ToolResult = {
        toolUseId: b["tool_use_id"] as string,
        content: b["content"],
        text: toolResultText(b["content"]),
        // `is_error` may be absent on success; a string tool_use_result means failure.
        isError: b["is_error"] === true || (results.length === 1 && typeof o["tool_use_result"] === "string"),
        lineIndex: index,
      };
      if ("tool_use_result" in o && results.length === 1) r.toolUseResult = o["tool_use_result"];
      const call = fold.toolCalls.get(r.toolUseId);
      if (call !== undefined && call.result === undefined) call.result = r;
      else fold.orphanResults.push(r);
    }
  }
  return fold;
}

/** Tool calls that never got a result (e.g. the run was killed mid-tool). */
export function unpairedToolCalls(fold: Fold): ToolCall[] {
  return [...fold.toolCalls.values()].filter((c) => c.result === undefined);
}

