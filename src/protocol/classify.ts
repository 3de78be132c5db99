// What went wrong in a run, decided from the stream-json envelope. The envelope outranks the exit
// code: an API failure is `subtype:"success"` with `is_error:true`, and the CLI may exit 0 or 1 for it.
import type { ParsedLine } from "./parse.ts";
import { isObj, stringField, type Obj } from "../kernel/index.ts";
import { objOf, parsedLines, type LinesInput } from "./lines.ts";

export type ErrorKind =
  | "ok"
  | "lost_session"
  | "auth"
  | "rate_limit"
  | "overloaded"
  | "server_error"
  | "invalid_request"
  | "max_turns"
  | "max_budget"
  | "no_result"
  | "error_result"
  | "cli_error";

export const LOST_SESSION_TEXT = "No conversation found with session ID";

// The synthetic assistant line's top-level `error` values (measured), plus the API's error types.
const syntheticErrorKinds: Record<string, ErrorKind> = {
  authentication_failed: "auth",
  authentication_error: "auth",
  permission_error: "auth",
  billing_error: "auth",
  oauth_org_not_allowed: "auth",
  rate_limit: "rate_limit",
  rate_limit_error: "rate_limit",
  overloaded: "overloaded",
  overloaded_error: "overloaded",
  server_error: "server_error",
  api_error: "server_error",
  invalid_request: "invalid_request",
  invalid_request_error: "invalid_request",
  not_found_error: "invalid_request",
  request_too_large: "invalid_request",
};

function kindOfStatus(status: number): ErrorKind | undefined {
  if (status === 401 || status === 403) return "auth";
  if (status === 429) return "rate_limit";
  if (status === 529) return "overloaded";
  if (status >= 500 && status <= 599) return "server_error";
  if (status >= 400 && status <= 499) return "invalid_request";
  return undefined;
}

function resultObj(input: ParsedLine | Obj): Obj | undefined {
  if ("category" in input && "raw" in input && typeof input.category === "string") return objOf(input as ParsedLine);
  return input as Obj;
}

function errorTexts(result: Obj): string[] {
  const errs = result["errors"];
  const out: string[] = [];
  if (Array.isArray(errs))
    for (const entry of errs) out.push(typeof entry === "string" ? entry : JSON.stringify(entry));
  return out;
}

/**
 * Kind of one `result` line. `syntheticError` is the `error` field of the synthetic assistant line
 * the CLI printed before it (classifyRun passes it); the result's own fields decide otherwise.
 */
export function classifyResult(result: ParsedLine | Obj, syntheticError?: string): ErrorKind {
  const resultLine = resultObj(result);
  if (resultLine === undefined || resultLine["type"] !== "result") return "cli_error";
  const subtype = stringField(resultLine, "subtype") ?? "";
  const errors = errorTexts(resultLine);
  if (errors.some((e) => e.includes(LOST_SESSION_TEXT))) return "lost_session";
  if (subtype === "error_max_turns") return "max_turns";
  if (subtype === "error_max_budget_usd") return "max_budget";
  const isError = resultLine["is_error"] === true || subtype.startsWith("error");
  if (!isError) return "ok";
  // The HTTP status is the more precise signal: the CLI labels a 529 `server_error` in its synthetic
  // line, though the API's answer was "overloaded".
  const status = resultLine["api_error_status"];
  if (typeof status === "number") {
    const kind = kindOfStatus(status);
    if (kind !== undefined) return kind;
  }
  if (syntheticError !== undefined) {
    const kind = syntheticErrorKinds[syntheticError];
    if (kind !== undefined) return kind;
  }
  if (resultLine["terminal_reason"] === "max_turns") return "max_turns";
  const text = stringField(resultLine, "result") ?? "";
  const match = /API Error:[^\n]*?\b([45]\d\d)\b/.exec(text);
  if (match) {
    const kind = kindOfStatus(Number(match[1]));
    if (kind !== undefined) return kind;
  }
  // The run ended in an error result of its own (no API failure behind it): the task's failure.
  return "error_result";
}

/** Incremental classifier: feed lines in order, read `kinds()` / `kind()` at any point. */
export class RunClassifier {
  #lastSyntheticError: string | undefined;
  #kinds: ErrorKind[] = [];
  add(parsed: ParsedLine): ErrorKind | undefined {
    const line = objOf(parsed);
    if (line === undefined) return undefined;
    const type = line["type"];
    if (type === "assistant") {
      const syntheticError = stringField(line, "error");
      if (syntheticError !== undefined) this.#lastSyntheticError = syntheticError;
      return undefined;
    }
    if (type !== "result") return undefined;
    const kind = classifyResult(line, this.#lastSyntheticError);
    this.#lastSyntheticError = undefined;
    this.#kinds.push(kind);
    return kind;
  }
  /** One kind per result line, in order. */
  kinds(): ErrorKind[] {
    return [...this.#kinds];
  }
  /** The last result's kind; `no_result` when the run printed none (e.g. killed by SIGTERM). */
  kind(): ErrorKind {
    return this.#kinds.at(-1) ?? "no_result";
  }
}

/**
 * The error kind of a finished run from its lines: `ok`, or why it failed (`auth`, `rate_limit`, `lost_session`,
 * `no_result`, …); the result line outranks the exit code.
 */
export function classifyRun(lines: LinesInput): ErrorKind {
  const classifier = new RunClassifier();
  for (const parsed of parsedLines(lines)) classifier.add(parsed);
  return classifier.kind();
}

export interface RetryHints {
  /** Delay the CLI chose before its last retry (`system/api_retry.retry_delay_ms`). */
  retryDelayMs?: number;
  /** When the rate limit resets, epoch milliseconds (`rate_limit_event.rate_limit_info.resetsAt`). */
  resetsAtMs?: number;
  /** Retries the CLI made by itself, and the most it would make. */
  apiRetries: number;
  maxRetries?: number;
  /** HTTP status of the last retried error. */
  lastErrorStatus?: number;
  rateLimitStatus?: string;
}

function toEpochMs(value: unknown): number | undefined {
  if (typeof value === "number" && Number.isFinite(value)) return value < 1e11 ? value * 1000 : value; // seconds vs ms
  if (typeof value === "string") {
    const asNumber = Number(value);
    if (Number.isFinite(asNumber) && value.trim() !== "") return toEpochMs(asNumber);
    const parsedMs = Date.parse(value);
    return Number.isNaN(parsedMs) ? undefined : parsedMs;
  }
  return undefined;
}

/** Retry hints the lines carry, or undefined when they carry none. */
export function retryHints(lines: LinesInput): RetryHints | undefined {
  const hints: RetryHints = { apiRetries: 0 };
  let any = false;
  for (const parsed of parsedLines(lines)) {
    const line = objOf(parsed);
    if (line === undefined) continue;
    if (line["type"] === "system" && line["subtype"] === "api_retry") {
      any = true;
      hints.apiRetries++;
      if (typeof line["retry_delay_ms"] === "number") hints.retryDelayMs = line["retry_delay_ms"];
      if (typeof line["max_retries"] === "number") hints.maxRetries = line["max_retries"];
      if (typeof line["error_status"] === "number") hints.lastErrorStatus = line["error_status"];
    } else if (line["type"] === "rate_limit_event") {
      const info = line["rate_limit_info"];
      if (!isObj(info)) continue;
      const reset = toEpochMs(info["resetsAt"] ?? info["resets_at"]);
      if (reset !== undefined) {
        hints.resetsAtMs = reset;
        any = true;
      }
      if (typeof info["status"] === "string") {
        hints.rateLimitStatus = info["status"];
        any = true;
      }
    }
  }
  return any ? hints : undefined;
}
