// A span per model call the worker's gateway saw (`model.call` events), under the attempt span:
// `chat <model>`, timed by the call's own start and duration, with its usage and status.
import { SpanKind, SpanStatusCode, type Attributes, type Context, type Tracer } from "@opentelemetry/api";
import { dataOf } from "../../events/index.ts";
import { millisOf } from "./time.ts";
import { GENAI } from "./names.ts";

export function modelCallSpan(
  tracer: Tracer,
  parent: Context,
  data: unknown,
  text: (value: string, field: string) => string,
): boolean {
  const call = dataOf("model.call", data);
  const start = call === undefined ? undefined : millisOf(call.startedAt);
  if (call === undefined || start === undefined) return false;
  const model = call.model === undefined ? undefined : text(call.model, "model");
  const attributes: Attributes = {
    [GENAI.operation]: call.path === "/v1/messages" ? "chat" : call.path,
    [GENAI.provider]: "anthropic",
    "http.request.method": call.method,
    "url.path": call.path,
    "http.response.status_code": call.status,
    "turnstream.gateway.stream": call.stream,
  };
  if (model !== undefined) attributes[GENAI.requestModel] = model;
  if (call.ttfbMs !== undefined) attributes["turnstream.gateway.ttfb_ms"] = call.ttfbMs;
  if (call.usage !== undefined) {
    attributes[GENAI.inputTokens] = call.usage.input_tokens;
    attributes[GENAI.outputTokens] = call.usage.output_tokens;
    attributes[GENAI.cacheReadTokens] = call.usage.cache_read_input_tokens;
    attributes[GENAI.cacheCreationTokens] = call.usage.cache_creation_input_tokens;
  }
  if (call.costUsd !== undefined) attributes["turnstream.cost_usd"] = call.costUsd;
  if (call.retryAfterS !== undefined) attributes["turnstream.gateway.retry_after_s"] = call.retryAfterS;
  if (call.answeredBy !== undefined) attributes["turnstream.gateway.answered_by"] = call.answeredBy;
  const name = model === undefined ? "chat" : `chat ${model}`;
  const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, startTime: start, attributes }, parent);
  if (call.status >= 400) {
    span.setAttribute(GENAI.errorType, String(call.status));
    span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${call.status}` });
  } else if (call.streamError !== undefined) {
    span.setAttribute(GENAI.errorType, call.streamError);
    span.setStatus({ code: SpanStatusCode.ERROR, message: `${call.streamError} in the stream` });
  }
  span.end(start + call.durationMs);
  return true;
}
