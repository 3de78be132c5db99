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

function resultObj(r: ParsedLine | Obj): Obj | undefined {
  if ("category" in r && "raw" in r && typeof r.category === "string") return objOf(r as ParsedLine);
  return r as Obj;
}

function errorTexts(o: Obj): string[] {
  const errs = o["errors"];
  const out: string[] = [];
  if (Array.isArray(errs)) for (const e of errs) out.push(typeof e === "string" ? e : JSON.stringify(e));
  return out;
}

/**
 * Kind of one `result` line. `syntheticError` is the `error` field of the synthetic assistant line
 * the CLI printed before it (classifyRun passes it); the result's own fields decide otherwise.
 */
export function classifyResult(result: ParsedLine | Obj, syntheticError?: string): ErrorKind {
  const o = resultObj(result);
  if (o === undefined || o["type"] !== "result") return "cli_error";
  const subtype = stringField(o, "subtype") ?? "";
  const errors = errorTexts(o);
  if (errors.some((e) => e.includes(LOST_SESSION_TEXT))) return "lost_session";
  if (subtype === "error_max_turns") return "max_turns";
  if (subtype === "error_max_budget_usd") return "max_budget";
  const isError = o["is_error"] === true || subtype.startsWith("error");
  if (!isError) return "ok";
  // The HTTP status is the more precise signal: the CLI labels a 529 `server_error` in its synthetic
  // line, though the API's answer was "overloaded".
  const status = o["api_error_status"];
  if (typeof status === "number") {
    const k = kindOfStatus(status);
    if (k !== undefined) return k;
  }
  if (syntheticError !== undefined) {
    const k = syntheticErrorKinds[syntheticError];
    if (k !== undefined) return k;
  }
  if (o["terminal_reason"] === "max_turns") return "max_turns";
  const text = stringField(o, "result") ?? "";
  const m = /API Error:[^\n]*?\b([45]\d\d)\b/.exec(text);
  if (m) {
    const k = kindOfStatus(Number(m[1]));
    if (k !== undefined) return k;
  }
  // The run ended in an error result of its own (no API failure behind it): the task's failure.
  return "error_result";
}

/** Incremental classifier: feed lines in order, read `kinds()` / `kind()` at any point. */
export class RunClassifier {
  #lastSyntheticError: string | undefined;
  #kinds: ErrorKind[] = [];
  add(p: ParsedLine): ErrorKind | undefined {
    const o = objOf(p);
    if (o === undefined) return undefined;
    const t = o["type"];
    if (t === "assistant") {
      const e = stringField(o, "error");
      if (e !== undefined) this.#lastSyntheticError = e;
      return undefined;
    }
    if (t !== "result") return undefined;
    const k = classifyResult(o, this.#lastSyntheticError);
    this.#lastSyntheticError = undefined;
    this.#kinds.push(k);
    return k;
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

/** The error kind of a finished run from its lines: `ok`, or why it failed (`auth`, `rate_limit`, `lost_session`, `no_result`, …); the result line outranks the exit code. */
export function classifyRun(lines: LinesInput): ErrorKind {
  const c = new RunClassifier();
  for (const p of parsedLines(lines)) c.add(p);
  return c.kind();
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

function toEpochMs(v: unknown): number | undefined {
  if (typeof v === "number" && Number.isFinite(v)) return v < 1e11 ? v * 1000 : v; // seconds vs ms
  if (typeof v === "string") {
    const n = Number(v);
    if (Number.isFinite(n) && v.trim() !== "") return toEpochMs(n);
    const d = Date.parse(v);
    return Number.isNaN(d) ? undefined : d;
  }
  return undefined;
}

/** Retry hints the lines carry, or undefined when they carry none. */
export function retryHints(lines: LinesInput): RetryHints | undefined {
  const h: RetryHints = { apiRetries: 0 };
  let any = false;
  for (const p of parsedLines(lines)) {
    const o = objOf(p);
    if (o === undefined) continue;
    if (o["type"] === "system" && o["subtype"] === "api_retry") {
      any = true;
      h.apiRetries++;
      if (typeof o["retry_delay_ms"] === "number") h.retryDelayMs = o["retry_delay_ms"];
      if (typeof o["max_retries"] === "number") h.maxRetries = o["max_retries"];
      if (typeof o["error_status"] === "number") h.lastErrorStatus = o["error_status"];
    } else if (o["type"] === "rate_limit_event") {
      const info = o["rate_limit_info"];
      if (!isObj(info)) continue;
      const reset = toEpochMs(info["resetsAt"] ?? info["resets_at"]);
      if (reset !== undefined) {
        h.resetsAtMs = reset;
        any = true;
      }
      if (typeof info["status"] === "string") {
        h.rateLimitStatus = info["status"];
        any = true;
      }
    }
  }
  return any ? h : undefined;
}
