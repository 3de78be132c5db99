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

  add(o: Obj, index: number): void {
    const type = o["type"];
    if (type === "result") this.fold.results.push(o);
    else if (type === "assistant") this.#addAssistant(o, index);
    else if (type === "user") this.#addUser(o, index);
  }

  /** The message list a line belongs to: top level, or the subagent of the tool call `parent`. */
  #groupFor(parent: string | null): FoldedMessage[] {
    if (parent === null) return this.fold.messages;
    let g = this.fold.subagents.get(parent);
    if (g === undefined) {
      g = [];
      this.fold.subagents.set(parent, g);
      const call = this.fold.toolCalls.get(parent);
      if (call !== undefined) call.subagent = g;
    }
    return g;
  }

  #addAssistant(o: Obj, index: number): void {
    const parent = stringField(o, "parent_tool_use_id") ?? null;
    const m = this.#assistantMessage(o, parent);
    const err = stringField(o, "error");
    if (err !== undefined) m.error = err;
    m.lineIndexes.push(index);
    for (const b of contentBlocks(o)) {
      m.blocks.push(b);
      if (b["type"] !== "tool_use" || typeof b["id"] !== "string") continue;
      if (this.fold.toolCalls.has(b["id"])) continue; // the same block printed twice
      const call: ToolCall = {
        id: b["id"],
        name: typeof b["name"] === "string" ? b["name"] : "",
        input: b["input"],
        parentToolUseId: parent,
        lineIndex: index,
      };
      const sub = this.fold.subagents.get(call.id);
      if (sub !== undefined) call.subagent = sub;
      m.toolCalls.push(call);
      this.fold.toolCalls.set(call.id, call);
    }
  }

  /** The message this assistant line continues (same parent and id), or a new one. */
  #assistantMessage(o: Obj, parent: string | null): FoldedMessage {
    const msg = isObj(o["message"]) ? o["message"] : {};
    const id = stringField(msg, "id");
    const key = id === undefined ? undefined : `${parent ?? ""}\u0000${id}`;
    const known = key === undefined ? undefined : this.#byMessageId.get(key);
    if (known !== undefined) return known;
    const m: FoldedMessage = { role: "assistant", parentToolUseId: parent, blocks: [], toolCalls: [], lineIndexes: [] };
    if (id !== undefined) m.id = id;
    const model = stringField(msg, "model");
    if (model !== undefined) m.model = model;
    this.#groupFor(parent).push(m);
    if (key !== undefined) this.#byMessageId.set(key, m);
    return m;
  }

  /** A user line: tool results (paired with their calls) and/or text. */
  #addUser(o: Obj, index: number): void {
    const parent = stringField(o, "parent_tool_use_id") ?? null;
    const blocks = contentBlocks(o);
    this.#groupFor(parent).push({ role: "user", parentToolUseId: parent, blocks, toolCalls: [], lineIndexes: [index] });
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
      const call = this.fold.toolCalls.get(r.toolUseId);
      if (call !== undefined && call.result === undefined) call.result = r;
      else this.fold.orphanResults.push(r);
    }
  }
}

/** The run's lines folded into messages: per-block assistant lines joined by message id, tool calls paired with their results, subagent work grouped. */
export function foldMessages(lines: LinesInput): Fold {
  const folder = new Folder();
  let index = -1;
  for (const p of parsedLines(lines)) {
    index++;
    const o = objOf(p);
    if (o !== undefined) folder.add(o, index);
  }
  return folder.fold;
}

/** Tool calls that never got a result (e.g. the run was killed mid-tool). */
export function unpairedToolCalls(fold: Fold): ToolCall[] {
  return [...fold.toolCalls.values()].filter((c) => c.result === undefined);
}
