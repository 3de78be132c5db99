// The names spans use: span names and the attribute names of the OpenTelemetry GenAI semantic
// conventions (turnstream's own attributes are written out where they are set, as `turnstream.*`).

/** GenAI semantic-convention attribute names we set. */
export const GENAI = {
  operation: "gen_ai.operation.name",
  provider: "gen_ai.provider.name",
  agentName: "gen_ai.agent.name",
  conversationId: "gen_ai.conversation.id",
  requestModel: "gen_ai.request.model",
  responseModel: "gen_ai.response.model",
  responseId: "gen_ai.response.id",
  finishReasons: "gen_ai.response.finish_reasons",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  cacheReadTokens: "gen_ai.usage.cache_read.input_tokens",
  cacheCreationTokens: "gen_ai.usage.cache_creation.input_tokens",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  toolArguments: "gen_ai.tool.call.arguments",
  errorType: "error.type",
} as const;

export const AGENT_NAME = "claude-code";
export const ATTEMPT_SPAN_NAME = `invoke_agent ${AGENT_NAME}`;
/** The root of a session's own trace (session.ts). */
export const SESSION_SPAN_NAME = "turnstream.session";
export const toolSpanName = (tool: string): string => `execute_tool ${tool}`;
