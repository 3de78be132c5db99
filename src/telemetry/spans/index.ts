// Spans from an attempt's event stream: one `invoke_agent claude-code` span per attempt, an
// `execute_tool <name>` child per tool call (subagent calls nested under the Task/Agent call that
// spawned them), span events for API retries, hooks, permission denials and stderr. Attribute names
// follow the OpenTelemetry GenAI semantic conventions.
export { AttemptSpans, type AttemptSpansOptions } from "./attempt.ts";
export { attemptSpansObserver } from "./observer.ts";
export { AGENT_NAME, ATTEMPT_SPAN_NAME, GENAI, SESSION_SPAN_NAME, toolSpanName } from "./names.ts";
export { sessionSpan, type EmitSpans } from "./session.ts";
