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

  add(p: ParsedLine): void {
    const s = this.#s;
    s.lines++;
    if (p.category === "known") s.parsed++;
    else s[p.category]++;
    s.byType[p.type] = (s.byType[p.type] ?? 0) + 1;
    const o = objOf(p);
    if (o === undefined) return;
    const kind = this.#classifier.add(p);
    const sid = stringField(o, "session_id");
    if (sid !== undefined && s.sessionId === null) s.sessionId = sid;
    const type = o["type"];
    if (type === "system" && o["subtype"] === "init") {
      const v = stringField(o, "claude_code_version");
      if (v !== undefined) s.cliVersion = v;
    } else if (type === "result" && kind !== undefined) {
      const errs = o["errors"];
      s.results.push({
        subtype: stringField(o, "subtype") ?? null,
        isError: o["is_error"] === true,
        terminalReason: stringField(o, "terminal_reason") ?? null,
        errorKind: kind,
        errors: Array.isArray(errs) ? errs.map((e) => (typeof e === "string" ? e : JSON.stringify(e))) : [],
      });
    } else if (type === "assistant") {
      for (const b of contentBlocks(o)) {
        if (b["type"] !== "tool_use" || typeof b["id"] !== "string" || this.#seenCalls.has(b["id"])) continue;
        this.#seenCalls.add(b["id"]);
        s.toolCalls++;
        const name = typeof b["name"] === "string" ? b["name"] : "";
        this.#open.set(b["id"], name);
        if (name === "Bash" && isObj(b["input"]) && typeof b["input"]["command"] === "string") {
          s.bashCommands.push(b["input"]["command"]);
        }
      }
    } else if (type === "user") {
      for (const b of contentBlocks(o)) {
        if (b["type"] !== "tool_result") continue;
        s.toolResults++;
        if (typeof b["tool_use_id"] === "string") this.#open.delete(b["tool_use_id"]);
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

/** One summary of a recorded run: line counts by type, session id, CLI version, results, tool calls and the error kind (what `turnstream parse` prints). */
export function summarizeRun(lines: LinesInput): RunSummary {
  const s = new RunSummarizer();
  for (const p of parsedLines(lines)) s.add(p);
  return s.finish();
}

/** The session id the run reports (first line that carries one), or undefined. */
export function sessionIdOf(lines: LinesInput): string | undefined {
  for (const p of parsedLines(lines)) {
    const sid = stringField(objOf(p), "session_id");
    if (sid !== undefined) return sid;
  }
  return undefined;
}

/** The CLI version from `system/init` (`claude_code_version`), or undefined. */
export function cliVersionOf(lines: LinesInput): string | undefined {
  for (const p of parsedLines(lines)) {
    const o = objOf(p);
    if (o?.["type"] === "system" && o["subtype"] === "init") {
      const v = stringField(o, "claude_code_version");
      if (v !== undefined) return v;
    }
  }
  return undefined;
}
