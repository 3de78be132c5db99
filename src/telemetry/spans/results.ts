// What the CLI's result lines add to the attempt span: token usage, cost, turns, finish and terminal
// reasons, permission denials, and the error text its status takes if the attempt fails. A run with
// background subagents prints several results; each updates the figures.
import type { Attributes, Span } from "@opentelemetry/api";
import { costAdded } from "../../events/index.ts";
import { isObj, numberField, objField, stringField, type Obj } from "../../kernel/index.ts";
import { GENAI } from "./names.ts";
import type { SpanText } from "./span-text.ts";

interface TokenCounts {
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
}

const noTokens = (): TokenCounts => ({ input: 0, output: 0, cacheRead: 0, cacheCreation: 0 });

export class ResultAccounting {
  readonly #root: Span;
  readonly #text: SpanText;
  readonly #captureContent: boolean;
  #count = 0;
  #errorText: string | undefined;
  /** From `modelUsage`: cumulative over the CLI process, main loop and subagents. */
  #processTokens: TokenCounts | undefined;
  /** From `usage`: each result's main loop only, so summed; the fallback when no modelUsage came. */
  #summedTokens: TokenCounts | undefined;
  /** Where the CLI session's running total stood before the attempt (attempt.started `costBaseUsd`). */
  costBaseUsd = 0;

  constructor(root: Span, text: SpanText, captureContent: boolean) {
    this.#root = root;
    this.#text = text;
    this.#captureContent = captureContent;
  }

  /** Result lines seen. */
  get count(): number {
    return this.#count;
  }

  /** The last result's error text (its `result`, else its `errors`), when it was an error. */
  get errorText(): string | undefined {
    return this.#errorText;
  }

  /** One result line; `at` stamps its permission denials (the line itself has no time). */
  add(line: Obj, at: number): void {
    this.#count++;
    this.#root.setAttribute("turnstream.result_count", this.#count);
    this.#addTokens(line);
    this.#root.setAttributes(resultFigures(line, this.costBaseUsd));
    for (const denial of Array.isArray(line["permission_denials"]) ? line["permission_denials"] : []) {
      if (isObj(denial)) this.#root.addEvent("permission_denial", this.#denialAttributes(denial), at);
    }
    this.#errorText = errorTextOf(line);
  }

  #addTokens(line: Obj): void {
    this.#processTokens = modelUsageTokens(objField(line, "modelUsage")) ?? this.#processTokens;
    const usage = objField(line, "usage");
    if (usage !== undefined) {
      const sum = (this.#summedTokens ??= noTokens());
      sum.input += numberField(usage, "input_tokens") ?? 0;
      sum.output += numberField(usage, "output_tokens") ?? 0;
      sum.cacheRead += numberField(usage, "cache_read_input_tokens") ?? 0;
      sum.cacheCreation += numberField(usage, "cache_creation_input_tokens") ?? 0;
    }
    const tokens = this.#processTokens ?? this.#summedTokens;
    if (tokens === undefined) return;
    // The GenAI conventions count cached prompt tokens inside gen_ai.usage.input_tokens; the API (and
    // the CLI) report them apart, so input = uncached + cache reads + cache writes, and the two cache
    // counts are also given on their own.
    this.#root.setAttributes({
      [GENAI.inputTokens]: tokens.input + tokens.cacheRead + tokens.cacheCreation,
      [GENAI.outputTokens]: tokens.output,
      [GENAI.cacheReadTokens]: tokens.cacheRead,
      [GENAI.cacheCreationTokens]: tokens.cacheCreation,
    });
  }

  #denialAttributes(denial: Obj): Attributes {
    const attributes: Attributes = {};
    const name = stringField(denial, "tool_name");
    if (name !== undefined) attributes[GENAI.toolName] = name;
    const id = stringField(denial, "tool_use_id");
    if (id !== undefined) attributes[GENAI.toolCallId] = id;
    if (this.#captureContent && denial["tool_input"] !== undefined) {
      attributes[GENAI.toolArguments] = this.#text(JSON.stringify(denial["tool_input"]), GENAI.toolArguments);
    }
    return attributes;
  }
}

/** The model that answered, as a result names it: the first key of its modelUsage. */
export function resultModel(line: Obj): string | undefined {
  const modelUsage = objField(line, "modelUsage");
  return modelUsage === undefined || modelUsageTokens(modelUsage) === undefined
    ? undefined
    : Object.keys(modelUsage)[0];
}

/** Token counts summed over the models of a modelUsage; undefined when it names none. */
function modelUsageTokens(modelUsage: Obj | undefined): TokenCounts | undefined {
  if (modelUsage === undefined) return undefined;
  let tokens: TokenCounts | undefined;
  for (const model of Object.values(modelUsage)) {
    if (!isObj(model)) continue;
    tokens ??= noTokens();
    tokens.input += numberField(model, "inputTokens") ?? 0;
    tokens.output += numberField(model, "outputTokens") ?? 0;
    tokens.cacheRead += numberField(model, "cacheReadInputTokens") ?? 0;
    tokens.cacheCreation += numberField(model, "cacheCreationInputTokens") ?? 0;
  }
  return tokens;
}

/** Cost, turns, stop and terminal reasons, and the API's error status, as far as the result has them. */
function resultFigures(line: Obj, costBaseUsd: number): Attributes {
  const attributes: Attributes = {};
  // The attempt's own cost: total_cost_usd is the CLI session's running total.
  const total = numberField(line, "total_cost_usd");
  if (total !== undefined) attributes["turnstream.cost.usd"] = costAdded(costBaseUsd, total);
  const turns = numberField(line, "num_turns");
  if (turns !== undefined) attributes["turnstream.num_turns"] = turns;
  const stop = stringField(line, "stop_reason");
  if (stop !== undefined) attributes[GENAI.finishReasons] = [stop];
  const terminal = stringField(line, "terminal_reason");
  if (terminal !== undefined) attributes["turnstream.terminal_reason"] = terminal;
  const status = numberField(line, "api_error_status");
  if (status !== undefined) attributes["http.response.status_code"] = status;
  return attributes;
}

function errorTextOf(line: Obj): string | undefined {
  const isError = line["is_error"] === true || (stringField(line, "subtype") ?? "").startsWith("error");
  if (!isError) return undefined;
  const errors = Array.isArray(line["errors"])
    ? line["errors"].map((e) => (typeof e === "string" ? e : JSON.stringify(e))).join("; ")
    : "";
  return stringField(line, "result") ?? (errors !== "" ? errors : undefined);
}
