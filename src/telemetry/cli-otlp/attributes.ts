// Which of the CLI's own telemetry attributes leave the worker. An allow-list by name, for every
// value type (a name is text too, and a tool in the run can post spans with any names it likes):
// what a name below does not list is dropped. Names were read off what CLI 2.1.332 sends (spans
// claude_code.interaction, llm_request, tool, tool.execution, tool.blocked_on_user). Identity
// (user.id, user.email, user.account_uuid, organization.id) and where requests went (base URLs) are
// never kept, content only when the operator opts in; everything kept is scrubbed. Nor is the CLI's
// session id (`session.id`, `gen_ai.conversation.id`): a tool could write another session's there,
// and the trace the spans land in names the session already.

/** What happened, not what was said: models, token counts, durations, tool names, outcomes. */
const FACTS: readonly string[] = [
  "span.type",
  "terminal.type",
  "anthropic.provider",
  "anthropic.custom_base_url",
  "model",
  "speed",
  "effort",
  "attempt",
  "success",
  "decision",
  "source",
  "stop_reason",
  "status_code",
  "error.type",
  "duration_ms",
  "ttft_ms",
  "first_content_ms",
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_creation_tokens",
  "cost_usd",
  "tool_name",
  "tool_name_safe",
  "tool_use_id",
  "tool_source",
  "permission_mode",
  "bash_command_class",
  "llm_request.context",
  "query_source_safe",
  "user_prompt_length",
  "prompt_length",
  "interaction.sequence",
  "interaction.duration_ms",
  "parent.source",
  "queued_sends",
  "gen_ai.system",
  "gen_ai.provider.name",
  "gen_ai.operation.name",
  "gen_ai.request.model",
  "gen_ai.response.model",
  "gen_ai.response.finish_reasons",
  "gen_ai.tool.name",
  "gen_ai.tool.call.id",
  "gen_ai.usage.input_tokens",
  "gen_ai.usage.output_tokens",
  "gen_ai.usage.cache_read.input_tokens",
  "gen_ai.usage.cache_write.input_tokens",
];

/**
 * What the user, the model or a tool said: the prompt, tool inputs and outputs, the command a Bash
 * call ran, error texts, request and response bodies. Kept only with TURNSTREAM_CLI_TELEMETRY_CONTENT=1.
 */
const CONTENT: readonly string[] = [
  "user_prompt",
  "prompt",
  "prompt_text",
  "response",
  "tool_input",
  "tool_parameters",
  "tool_result",
  "tool_output",
  "bash_argv0",
  "bash_command",
  "error",
  "error.message",
  "api_request_body",
  "api_response_body",
  "gen_ai.input.messages",
  "gen_ai.output.messages",
  "gen_ai.tool.call.arguments",
  "gen_ai.tool.call.result",
];

/**
 * The CLI's resource: which version and platform sent the spans. service.name is not taken from the
 * request: a tool could name the worker's own service and pass its spans off as the worker's.
 */
export const RESOURCE_ATTRIBUTES: ReadonlySet<string> = new Set([
  "service.version",
  "host.arch",
  "os.type",
  "os.version",
]);

/** Content texts are capped at this many characters (after scrubbing). */
export const MAX_CONTENT_CHARS = 1024;

// Bounds on what one request may make the worker hold and export. The CLI's own spans stay far
// inside them; a tool of the run that posts with the token it can read may not, and what it posts
// waits in the worker's export queue beside every other run's spans.

/** A fact (a model name, an id, a tool name) longer than this is dropped, not cut: it is no fact. */
export const MAX_FACT_CHARS = 256;
/** Items of an array value past this many are dropped. */
export const MAX_ARRAY_ITEMS = 32;
/** A resource value (a version, a platform) longer than this is dropped. */
export const MAX_RESOURCE_CHARS = 128;
/** Events of one span past this many are dropped. */
export const MAX_EVENTS_PER_SPAN = 32;
/** Spans of one request past this many are refused (the CLI's exporter sends at most 512 at a time). */
export const MAX_SPANS_PER_REQUEST = 1024;

/** The service every received span is exported under, whatever the request's resource says. */
export const CLI_SERVICE_NAME = "claude-code";

export const FACT_ATTRIBUTES: ReadonlySet<string> = new Set(FACTS);
export const CONTENT_ATTRIBUTES: ReadonlySet<string> = new Set(CONTENT);

// Span and event names: dotted lowercase words, no digits (no hex or base64 token fits), bounded.
const NAME = /^[a-z_]{1,40}(?:\.[a-z_]{1,40}){0,5}$/;

/** Whether a span's, event's or scope's name may be exported as it is. */
export function plainName(name: unknown): name is string {
  return typeof name === "string" && NAME.test(name);
}
