// The attributes of the span events made from the CLI's system lines: API retries, hooks and
// permission denials. (system/init sets attributes of the attempt span; task lines belong to the
// tool spans, tools.ts.)
import type { Attributes } from "@opentelemetry/api";
import { isObj, numberField, stringField, type Obj } from "../../kernel/index.ts";
import { GENAI } from "./names.ts";
import type { SpanText } from "./span-text.ts";

/** system/api_retry: the CLI retries an API call. */
export function apiRetryAttributes(line: Obj, text: SpanText): Attributes {
  const attributes: Attributes = {};
  setNumber(attributes, "turnstream.retry.attempt", numberField(line, "attempt"));
  setNumber(attributes, "turnstream.retry.max_retries", numberField(line, "max_retries"));
  setNumber(attributes, "turnstream.retry.delay_ms", numberField(line, "retry_delay_ms"));
  setNumber(attributes, "http.response.status_code", numberField(line, "error_status"));
  // The API's error type: a string, or an object's `type`.
  const error = line["error"];
  const errorType = typeof error === "string" ? error : isObj(error) ? stringField(error, "type") : undefined;
  if (errorType !== undefined) attributes[GENAI.errorType] = text(errorType, GENAI.errorType);
  return attributes;
}

const HOOK_FIELDS = [
  ["hook_name", "turnstream.hook.name"],
  ["hook_event", "turnstream.hook.event"],
  ["hook_id", "turnstream.hook.id"],
  ["outcome", "turnstream.hook.outcome"],
] as const;

/** system/hook_started and system/hook_response: which hook ran and how it ended (never its output). */
export function hookAttributes(line: Obj, text: SpanText): Attributes {
  const attributes: Attributes = {};
  for (const [field, attribute] of HOOK_FIELDS) {
    const value = stringField(line, field);
    if (value !== undefined) attributes[attribute] = text(value, field);
  }
  setNumber(attributes, "turnstream.hook.exit_code", numberField(line, "exit_code"));
  return attributes;
}

/** system/permission_denied: a tool call was refused before it ran. */
export function permissionDeniedAttributes(line: Obj, text: SpanText): Attributes {
  const attributes: Attributes = {};
  const name = stringField(line, "tool_name");
  if (name !== undefined) attributes[GENAI.toolName] = name;
  const id = stringField(line, "tool_use_id");
  if (id !== undefined) attributes[GENAI.toolCallId] = id;
  const message = stringField(line, "message");
  if (message !== undefined) attributes["turnstream.permission.message"] = text(message, "message");
  return attributes;
}

function setNumber(attributes: Attributes, key: string, value: number | undefined): void {
  if (value !== undefined) attributes[key] = value;
}
