// A logged turn as a model-server script: each API response the CLI received becomes one scripted
// response, in the order the CLI printed them (assistant lines joined by message id through the
// protocol's fold), with tool-use ids, inputs, text, thinking, stop reason and usage kept; an API
// error the CLI reported becomes a scripted error of the same status. Each response after a tool
// call carries the digest of the tool results the recorded run sent, so a re-run whose tools saw
// something else is answered with an error at that step. The lines are the log's, already scrubbed,
// so a script holds nothing the log's readers could not see.
import { isObj, numberField, objField, stringField, type Obj } from "../kernel/index.ts";
import { foldMessages, parsedLines, type FoldedMessage } from "../protocol/index.ts";
import {
  parseScript,
  toolResultDigest,
  type Script,
  type ScriptBlock,
  type ScriptExpect,
  type ScriptResponse,
} from "../testing/index.ts";
import type { RecordedTurn } from "./record.ts";

const STOP_REASONS = new Set(["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]);
const USAGE_FIELDS = [
  "input_tokens",
  "output_tokens",
  "cache_creation_input_tokens",
  "cache_read_input_tokens",
] as const;
/** The Anthropic error type of an HTTP status, for a synthetic line that does not name one. */
const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  529: "overloaded_error",
};

/** Every string inside `value` with the recorded cwd replaced by the re-run's. */
function movedTo<T>(value: T, from: string, to: string): T {
  if (from === to) return value;
  if (typeof value === "string") return value.split(from).join(to) as T;
  if (Array.isArray(value)) return value.map((v) => movedTo(v, from, to)) as T;
  if (isObj(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, movedTo(v, from, to)])) as T;
  return value;
}

function scriptBlock(block: Obj): ScriptBlock | undefined {
  switch (block["type"]) {
    case "text":
      return typeof block["text"] === "string" ? { type: "text", text: block["text"] } : undefined;
    case "thinking": {
      const signature = stringField(block, "signature");
      return typeof block["thinking"] === "string"
        ? { type: "thinking", thinking: block["thinking"], ...(signature === undefined ? {} : { signature }) }
        : undefined;
    }
    case "redacted_thinking": {
      const data = stringField(block, "data");
      return { type: "redacted_thinking", ...(data === undefined ? {} : { data }) };
    }
    case "tool_use":
      return typeof block["name"] === "string" && isObj(block["input"])
        ? {
            type: "tool_use",
            name: block["name"],
            input: block["input"],
            ...(typeof block["id"] === "string" ? { id: block["id"] } : {}),
          }
        : undefined;
    default:
      return undefined;
  }
}

function usageOf(message: Obj | undefined): Partial<Record<(typeof USAGE_FIELDS)[number], number>> | undefined {
  const usage = objField(message, "usage");
  if (usage === undefined) return undefined;
  const out: Partial<Record<(typeof USAGE_FIELDS)[number], number>> = {};
  for (const field of USAGE_FIELDS) {
    const count = numberField(usage, field);
    if (count !== undefined && Number.isInteger(count) && count >= 0) out[field] = count;
  }
  return out;
}

/** The scripted error of a synthetic API-error line: its status and type, its text as the message. */
function errorResponse(line: Obj, blocks: readonly Obj[]): ScriptResponse {
  const status = numberField(line, "api_error_status") ?? 500;
  const type = stringField(line, "api_error_type") ?? ERROR_TYPES[status] ?? "api_error";
  const text = blocks.map((b) => stringField(b, "text") ?? "").join("\n");
  return {
    error: { status: status >= 400 && status <= 599 ? status : 500, type, message: text.replace(/^API Error: /, "") },
  };
}

function responseOf(
  message: FoldedMessage,
  lines: readonly (Obj | undefined)[],
  previous: FoldedMessage | undefined,
  turn: RecordedTurn,
): ScriptResponse | undefined {
  const first = lines[message.lineIndexes[0]!];
  const lastMessage = objField(lines[message.lineIndexes.at(-1)!], "message");
  if (first !== undefined && (first["is_api_error_message"] === true || message.model === "<synthetic>"))
    return errorResponse(first, message.blocks);
  const content = message.blocks.map(scriptBlock).filter((b): b is ScriptBlock => b !== undefined);
  if (content.length === 0) return undefined;
  const stop = stringField(lastMessage, "stop_reason");
  const usage = usageOf(lastMessage);
  const expected = expectOf(previous, turn.cwd);
  return {
    content,
    ...(stop !== undefined && STOP_REASONS.has(stop) ? { stopReason: stop as "end_turn" } : {}),
    ...(usage === undefined ? {} : { usage }),
    ...(expected === undefined ? {} : { expect: expected }),
  };
}

/** What the request after `previous` must carry: its tool calls' results as recorded. */
function expectOf(previous: FoldedMessage | undefined, cwd: string): ScriptExpect | undefined {
  const calls = (previous?.toolCalls ?? []).filter((c) => c.result !== undefined);
  if (calls.length === 0) return undefined;
  return {
    toolResults: calls.map((call) => ({
      toolUseId: call.id,
      name: call.name,
      sha256: toolResultDigest(call.result!.text, cwd),
      isError: call.result!.isError,
    })),
  };
}

/** The scripted responses of one recorded turn, in the order the CLI received them. */
export function responsesOfTurn(turn: RecordedTurn): ScriptResponse[] {
  const parsed = [...parsedLines(turn.lines)];
  const fold = foldMessages(parsed);
  const lines = parsed.map((p) => (isObj(p.line) ? p.line : undefined));
  const groups = [fold.messages, ...fold.subagents.values()].map((g) => g.filter((m) => m.role === "assistant"));
  const ordered = groups
    .flatMap((g) => g.map((m, i) => ({ m, previous: g[i - 1] })))
    .sort((a, b) => a.m.lineIndexes[0]! - b.m.lineIndexes[0]!);
  return ordered
    .map(({ m, previous }) => responseOf(m, lines, previous, turn))
    .filter((r): r is ScriptResponse => r !== undefined);
}

export interface ScriptOptions {
  /**
   * Where the re-run works: the recorded cwd in the model's text and tool inputs is moved there. Default: the recorded
   * cwd.
   */
  cwd?: string | undefined;
}

/**
 * The model-server script that plays the model's side of `turns` back: their responses in order,
 * a request beyond them answered with an error (`exhausted: "error"`), tool results checked with the
 * re-run's cwd normalised. Every turn of one script must share a cwd.
 */
export function scriptFromTurns(turns: readonly RecordedTurn[], options: ScriptOptions = {}): Script {
  const cwd = options.cwd ?? turns[0]?.cwd;
  const responses = turns.flatMap((t) => movedTo(responsesOfTurn(t), t.cwd, cwd ?? t.cwd));
  return parseScript({ responses, exhausted: "error", ...(cwd === undefined ? {} : { cwd }) });
}
