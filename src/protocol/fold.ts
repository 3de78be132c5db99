// Folds the per-block line stream into messages. The CLI prints one `assistant` line per content
// block, all sharing `message.id`; tool results arrive one per `user` line in completion order;
// a subagent's lines carry the `parent_tool_use_id` of the tool call that started it.
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

/** Builds a Fold line by line. */
class Folder {
  readonly fold: Fold = { messages: [], subagents: new Map(), toolCalls: new Map(), orphanResults: [], results: [] };
  /** Assistant messages by parent and `message.id`: the CLI prints one line per content block. */
  readonly #byMessageId = new Map<string, FoldedMessage>();

  add(line: Obj, index: number): void {
    const type = line["type"];
    if (type === "result") this.fold.results.push(line);
    else if (type === "assistant") this.#addAssistant(line, index);
    else if (type === "user") this.#addUser(line, index);
  }

  /** The message list a line belongs to: top level, or the subagent of the tool call `parent`. */
  #groupFor(parent: string | null): FoldedMessage[] {
    if (parent === null) return this.fold.messages;
    let group = this.fold.subagents.get(parent);
    if (group === undefined) {
      group = [];
      this.fold.subagents.set(parent, group);
      const call = this.fold.toolCalls.get(parent);
      if (call !== undefined) call.subagent = group;
    }
    return group;
  }

  #addAssistant(line: Obj, index: number): void {
    const parent = stringField(line, "parent_tool_use_id") ?? null;
    const message = this.#assistantMessage(line, parent);
    const err = stringField(line, "error");
    if (err !== undefined) message.error = err;
    message.lineIndexes.push(index);
    for (const block of contentBlocks(line)) {
      message.blocks.push(block);
      if (block["type"] !== "tool_use" || typeof block["id"] !== "string") continue;
      if (this.fold.toolCalls.has(block["id"])) continue; // the same block printed twice
      const call: ToolCall = {
        id: block["id"],
        name: typeof block["name"] === "string" ? block["name"] : "",
        input: block["input"],
        parentToolUseId: parent,
        lineIndex: index,
      };
      const sub = this.fold.subagents.get(call.id);
      if (sub !== undefined) call.subagent = sub;
      message.toolCalls.push(call);
      this.fold.toolCalls.set(call.id, call);
    }
  }

  /** The message this assistant line continues (same parent and id), or a new one. */
  #assistantMessage(line: Obj, parent: string | null): FoldedMessage {
    const msg = isObj(line["message"]) ? line["message"] : {};
    const id = stringField(msg, "id");
    const key = id === undefined ? undefined : `${parent ?? ""}\u0000${id}`;
    const known = key === undefined ? undefined : this.#byMessageId.get(key);
    if (known !== undefined) return known;
    const message: FoldedMessage = {
      role: "assistant",
      parentToolUseId: parent,
      blocks: [],
      toolCalls: [],
      lineIndexes: [],
    };
    if (id !== undefined) message.id = id;
    const model = stringField(msg, "model");
    if (model !== undefined) message.model = model;
    this.#groupFor(parent).push(message);
    if (key !== undefined) this.#byMessageId.set(key, message);
    return message;
  }

  /** A user line: tool results (paired with their calls) and/or text. */
  #addUser(line: Obj, index: number): void {
    const parent = stringField(line, "parent_tool_use_id") ?? null;
    const blocks = contentBlocks(line);
    this.#groupFor(parent).push({ role: "user", parentToolUseId: parent, blocks, toolCalls: [], lineIndexes: [index] });
    const results = blocks.filter((b) => b["type"] === "tool_result" && typeof b["tool_use_id"] === "string");
    for (const block of results) {
      const result: ToolResult = {
        toolUseId: block["tool_use_id"] as string,
        content: block["content"],
        text: toolResultText(block["content"]),
        // `is_error` may be absent on success; a string tool_use_result means failure.
        isError: block["is_error"] === true || (results.length === 1 && typeof line["tool_use_result"] === "string"),
        lineIndex: index,
      };
      if ("tool_use_result" in line && results.length === 1) result.toolUseResult = line["tool_use_result"];
      const call = this.fold.toolCalls.get(result.toolUseId);
      if (call !== undefined && call.result === undefined) call.result = result;
      else this.fold.orphanResults.push(result);
    }
  }
}

/**
 * The run's lines folded into messages: per-block assistant lines joined by message id, tool calls paired with their
 * results, subagent work grouped.
 */
export function foldMessages(lines: LinesInput): Fold {
  const folder = new Folder();
  let index = -1;
  for (const parsed of parsedLines(lines)) {
    index++;
    const line = objOf(parsed);
    if (line !== undefined) folder.add(line, index);
  }
  return folder.fold;
}

/** Tool calls that never got a result (e.g. the run was killed mid-tool). */
export function unpairedToolCalls(fold: Fold): ToolCall[] {
  return [...fold.toolCalls.values()].filter((c) => c.result === undefined);
}
