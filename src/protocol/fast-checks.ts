// Hand-written equivalents of the zod schemas for the line types that make up nearly every
// transcript (and the large system/init line every run starts with), so the hot path skips zod.
// Each check accepts only what its schema accepts (a check may be stricter, never looser: on `false`
// the parser falls back to zod, which has the last word). test/events/fast-checks.test.ts holds
// them to that against the schemas.
import { isObj, type Obj } from "../kernel/index.ts";
import type { SchemaKey } from "./schemas.ts";

type O = Obj;

const optStr = (v: unknown): boolean => v === undefined || typeof v === "string";
const nullStr = (v: unknown): boolean => v === undefined || v === null || typeof v === "string";
// zod's numbers are finite (JSON has no NaN or Infinity, but the contract holds for any value).
const optNum = (v: unknown): boolean => v === undefined || Number.isFinite(v);
const optBool = (v: unknown): boolean => v === undefined || typeof v === "boolean";
const nullNum = (v: unknown): boolean => v === undefined || v === null || Number.isFinite(v);

function typedBlocks(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) {
    const b = v[i];
    if (!isObj(b) || typeof b["type"] !== "string") return false;
  }
  return true;
}

const common = (o: O): boolean => optStr(o["session_id"]) && optStr(o["uuid"]);

function systemInit(o: O): boolean {
  if (o["type"] !== "system" || o["subtype"] !== "init") return false;
  const tools = o["tools"];
  if (tools !== undefined) {
    if (!Array.isArray(tools)) return false;
    for (let i = 0; i < tools.length; i++) if (typeof tools[i] !== "string") return false;
  }
  return (
    optStr(o["cwd"]) &&
    optStr(o["model"]) &&
    optStr(o["permissionMode"]) &&
    optStr(o["claude_code_version"]) &&
    optStr(o["apiKeySource"]) &&
    common(o)
  );
}

function assistant(o: O): boolean {
  const m = o["message"];
  return (
    o["type"] === "assistant" &&
    isObj(m) &&
    typedBlocks(m["content"]) &&
    optStr(m["id"]) &&
    optStr(m["model"]) &&
    optStr(m["role"]) &&
    nullStr(m["stop_reason"]) &&
    nullStr(o["parent_tool_use_id"]) &&
    optStr(o["error"]) &&
    common(o)
  );
}

function user(o: O): boolean {
  const m = o["message"];
  if (o["type"] !== "user" || !isObj(m) || !optStr(m["role"])) return false;
  const c = m["content"];
  return (typeof c === "string" || typedBlocks(c)) && nullStr(o["parent_tool_use_id"]) && common(o);
}

function streamEvent(o: O): boolean {
  const e = o["event"];
  return (
    o["type"] === "stream_event" &&
    isObj(e) &&
    typeof e["type"] === "string" &&
    nullStr(o["parent_tool_use_id"]) &&
    common(o)
  );
}

function result(o: O): boolean {
  const errors = o["errors"];
  const denials = o["permission_denials"];
  return (
    o["type"] === "result" &&
    typeof o["subtype"] === "string" &&
    optBool(o["is_error"]) &&
    optStr(o["result"]) &&
    (errors === undefined || Array.isArray(errors)) &&
    nullStr(o["terminal_reason"]) &&
    nullNum(o["api_error_status"]) &&
    optNum(o["num_turns"]) &&
    optNum(o["total_cost_usd"]) &&
    optNum(o["duration_ms"]) &&
    (denials === undefined || Array.isArray(denials)) &&
    common(o)
  );
}

export const fastChecks: Partial<Record<SchemaKey, (o: O) => boolean>> = {
  "system/init": systemInit,
  assistant,
  user,
  stream_event: streamEvent,
  result,
};
