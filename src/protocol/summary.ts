// A run's summary, built incrementally so a transcript of any size is summarised in bounded memory
// (only tool-call ids and Bash commands are kept).
import { RunClassifier, type ErrorKind } from "./classify.ts";
import type { ParsedLine } from "./parse.ts";
import { isObj, stringField } from "../kernel/index.ts";
import { contentBlocks, objOf, parsedLines, type LinesInput } from "./lines.ts";

export interface ResultSummary {
  subtype: string | null;
  isError: boolean;
  terminalReason: string | null;
  errorKind: ErrorKind;
  errors: string[];
}

export interface RunSummary {
  lines: number;
  parsed: number;
  unknown: number;
  invalid: number;
  truncated: number;
  byType: Record<string, number>;
  sessionId: string | null;
  cliVersion: string | null;
  results: ResultSummary[];
  errorKind: ErrorKind;
  toolCalls: number;
  toolResults: number;
  /** Calls that never got a result. */
  unpairedToolCalls: Array<{ id: string; name: string }>;
  bashCommands: string[];
}

export class RunSummarizer {
  #s: Omit<RunSummary, "errorKind" | "unpairedToolCalls"> = {
    lines: 0,
    parsed: 0,
    unknown: 0,
    invalid: 0,
    truncated: 0,
    byType: {},
    sessionId: null,
    cliVersion: null,
    results: [],
    toolCalls: 0,
    toolResults: 0,
    bashCommands: [],
  };
  #classifier = new RunClassifier();
  #open = new Map<string, string>();
  #seenCalls = new Set<string>();

  add(parsed: ParsedLine): void {
    const summary = this.#s;
    summary.lines++;
    if (parsed.category === "known") summary.parsed++;
    else summary[parsed.category]++;
    summary.byType[parsed.type] = (summary.byType[parsed.type] ?? 0) + 1;
    const line = objOf(parsed);
    if (line === undefined) return;
    const kind = this.#classifier.add(parsed);
    const sid = stringField(line, "session_id");
    if (sid !== undefined && summary.sessionId === null) summary.sessionId = sid;
    const type = line["type"];
    if (type === "system" && line["subtype"] === "init") {
      const version = stringField(line, "claude_code_version");
      if (version !== undefined) summary.cliVersion = version;
    } else if (type === "result" && kind !== undefined) {
      const errs = line["errors"];
      summary.results.push({
        subtype: stringField(line, "subtype") ?? null,
        isError: line["is_error"] === true,
        terminalReason: stringField(line, "terminal_reason") ?? null,
        errorKind: kind,
        errors: Array.isArray(errs) ? errs.map((e) => (typeof e === "string" ? e : JSON.stringify(e))) : [],
      });
    } else if (type === "assistant") {
      for (const block of contentBlocks(line)) {
        if (block["type"] !== "tool_use" || typeof block["id"] !== "string" || this.#seenCalls.has(block["id"]))
          continue;
        this.#seenCalls.add(block["id"]);
        summary.toolCalls++;
        const name = typeof block["name"] === "string" ? block["name"] : "";
        this.#open.set(block["id"], name);
        if (name === "Bash" && isObj(block["input"]) && typeof block["input"]["command"] === "string") {
          summary.bashCommands.push(block["input"]["command"]);
        }
      }
    } else if (type === "user") {
      for (const block of contentBlocks(line)) {
        if (block["type"] !== "tool_result") continue;
        summary.toolResults++;
        if (typeof block["tool_use_id"] === "string") this.#open.delete(block["tool_use_id"]);
      }
    }
  }

  finish(): RunSummary {
    return {
      ...this.#s,
      byType: { ...this.#s.byType },
      results: [...this.#s.results],
      bashCommands: [...this.#s.bashCommands],
      errorKind: this.#classifier.kind(),
      unpairedToolCalls: [...this.#open].map(([id, name]) => ({ id, name })),
    };
  }
}

/**
 * One summary of a recorded run: line counts by type, session id, CLI version, results, tool calls and the error kind
 * (what `turnstream parse` prints).
 */
export function summarizeRun(lines: LinesInput): RunSummary {
  const summarizer = new RunSummarizer();
  for (const parsed of parsedLines(lines)) summarizer.add(parsed);
  return summarizer.finish();
}

/** The session id the run reports (first line that carries one), or undefined. */
export function sessionIdOf(lines: LinesInput): string | undefined {
  for (const parsed of parsedLines(lines)) {
    const sid = stringField(objOf(parsed), "session_id");
    if (sid !== undefined) return sid;
  }
  return undefined;
}

/** The CLI version from `system/init` (`claude_code_version`), or undefined. */
export function cliVersionOf(lines: LinesInput): string | undefined {
  for (const parsed of parsedLines(lines)) {
    const line = objOf(parsed);
    if (line?.["type"] === "system" && line["subtype"] === "init") {
      const version = stringField(line, "claude_code_version");
      if (version !== undefined) return version;
    }
  }
  return undefined;
}
