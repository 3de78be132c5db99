// zod schemas for every line the CLI prints with `--output-format stream-json --verbose`.
// All objects are loose so fields a newer CLI adds survive a parse and reach the log unchanged.
// Schemas check only what our code relies on: the parser must accept every line the CLI can
// print, and validating deeper would only turn new CLI versions into "unknown" lines.
import { z } from "zod";

const str = z.string();
const optStr = z.string().optional();
const nullableStr = z.string().nullable().optional();
const optNum = z.number().optional();

export const ContentBlockSchema = z.looseObject({ type: str });
export const TextBlockSchema = z.looseObject({ type: z.literal("text"), text: str });
export const ThinkingBlockSchema = z.looseObject({ type: z.literal("thinking"), thinking: optStr });
export const ToolUseBlockSchema = z.looseObject({
  type: z.literal("tool_use"),
  id: str,
  name: str,
  input: z.unknown(),
});
export const ToolResultBlockSchema = z.looseObject({
  type: z.literal("tool_result"),
  tool_use_id: str,
  content: z.unknown().optional(),
  is_error: z.boolean().optional(),
});

const common = {
  session_id: optStr,
  uuid: optStr,
};

const systemBase = <S extends string>(subtype: S) => ({
  type: z.literal("system"),
  subtype: z.literal(subtype),
  ...common,
});

export const SystemInitSchema = z.looseObject({
  ...systemBase("init"),
  cwd: optStr,
  model: optStr,
  tools: z.array(str).optional(),
  permissionMode: optStr,
  claude_code_version: optStr,
  apiKeySource: optStr,
});
export const SystemApiRetrySchema = z.looseObject({
  ...systemBase("api_retry"),
  attempt: optNum,
  max_retries: optNum,
  retry_delay_ms: optNum,
  error_status: z.number().nullable().optional(),
  error: z.unknown().optional(),
});
export const SystemStatusSchema = z.looseObject({ ...systemBase("status"), status: z.unknown().optional() });
export const SystemThinkingTokensSchema = z.looseObject({ ...systemBase("thinking_tokens") });
export const SystemPermissionDeniedSchema = z.looseObject({ ...systemBase("permission_denied") });
export const SystemHookStartedSchema = z.looseObject({
  ...systemBase("hook_started"),
  hook_id: optStr,
  hook_name: optStr,
  hook_event: optStr,
});
export const SystemHookResponseSchema = z.looseObject({
  ...systemBase("hook_response"),
  hook_id: optStr,
  hook_name: optStr,
  hook_event: optStr,
  outcome: optStr,
  exit_code: z.number().nullable().optional(),
});
export const SystemTaskStartedSchema = z.looseObject({
  ...systemBase("task_started"),
  task_id: optStr,
  tool_use_id: nullableStr,
  description: optStr,
});
export const SystemTaskProgressSchema = z.looseObject({
  ...systemBase("task_progress"),
  task_id: optStr,
  tool_use_id: nullableStr,
});
export const SystemTaskUpdatedSchema = z.looseObject({ ...systemBase("task_updated"), task_id: optStr });
export const SystemTaskNotificationSchema = z.looseObject({
  ...systemBase("task_notification"),
  task_id: optStr,
  tool_use_id: nullableStr,
  status: optStr,
});
export const SystemBackgroundTasksChangedSchema = z.looseObject({ ...systemBase("background_tasks_changed") });
export const SystemCompactBoundarySchema = z.looseObject({
  ...systemBase("compact_boundary"),
  compact_metadata: z.looseObject({}).optional(),
});

export const AssistantSchema = z.looseObject({
  type: z.literal("assistant"),
  message: z.looseObject({
    id: optStr,
    model: optStr,
    role: optStr,
    content: z.array(ContentBlockSchema),
    stop_reason: nullableStr,
    usage: z.unknown().optional(),
  }),
  parent_tool_use_id: nullableStr,
  // Set on the synthetic line the CLI prints when the API call failed.
  error: optStr,
  ...common,
});

export const UserSchema = z.looseObject({
  type: z.literal("user"),
  message: z.looseObject({
    role: optStr,
    content: z.union([str, z.array(ContentBlockSchema)]),
  }),
  parent_tool_use_id: nullableStr,
  // An object on success, a string on failure (measured).
  tool_use_result: z.unknown().optional(),
  ...common,
});

export const StreamEventSchema = z.looseObject({
  type: z.literal("stream_event"),
  event: z.looseObject({ type: str }),
  parent_tool_use_id: nullableStr,
  ...common,
});

export const ResultSchema = z.looseObject({
  type: z.literal("result"),
  subtype: str,
  is_error: z.boolean().optional(),
  result: optStr,
  errors: z.array(z.unknown()).optional(),
  terminal_reason: nullableStr,
  api_error_status: z.number().nullable().optional(),
  num_turns: optNum,
  total_cost_usd: optNum,
  duration_ms: optNum,
  permission_denials: z.array(z.unknown()).optional(),
  ...common,
});

export const RateLimitEventSchema = z.looseObject({
  type: z.literal("rate_limit_event"),
  rate_limit_info: z.looseObject({}).optional(),
  ...common,
});

export const ControlRequestSchema = z.looseObject({
  type: z.literal("control_request"),
  request_id: str,
  request: z.looseObject({ subtype: str }),
});

export const ControlResponseSchema = z.looseObject({
  type: z.literal("control_response"),
  response: z.looseObject({ subtype: str, request_id: optStr }),
});

/** Schema per line type key (`type` or `type/subtype`). */
export const lineSchemas = {
  "system/init": SystemInitSchema,
  "system/api_retry": SystemApiRetrySchema,
  "system/status": SystemStatusSchema,
  "system/thinking_tokens": SystemThinkingTokensSchema,
  "system/permission_denied": SystemPermissionDeniedSchema,
  "system/hook_started": SystemHookStartedSchema,
  "system/hook_response": SystemHookResponseSchema,
  "system/task_started": SystemTaskStartedSchema,
  "system/task_progress": SystemTaskProgressSchema,
  "system/task_updated": SystemTaskUpdatedSchema,
  "system/task_notification": SystemTaskNotificationSchema,
  "system/background_tasks_changed": SystemBackgroundTasksChangedSchema,
  "system/compact_boundary": SystemCompactBoundarySchema,
  assistant: AssistantSchema,
  user: UserSchema,
  stream_event: StreamEventSchema,
  result: ResultSchema,
  rate_limit_event: RateLimitEventSchema,
  control_request: ControlRequestSchema,
  control_response: ControlResponseSchema,
} as const;

export type LineSchemas = typeof lineSchemas;
export type SchemaKey = keyof LineSchemas;

export type SystemInitLine = z.infer<typeof SystemInitSchema>;
export type SystemApiRetryLine = z.infer<typeof SystemApiRetrySchema>;
export type AssistantLine = z.infer<typeof AssistantSchema>;
export type UserLine = z.infer<typeof UserSchema>;
export type StreamEventLine = z.infer<typeof StreamEventSchema>;
export type ResultLine = z.infer<typeof ResultSchema>;
export type RateLimitEventLine = z.infer<typeof RateLimitEventSchema>;
export type ControlRequestLine = z.infer<typeof ControlRequestSchema>;
export type ControlResponseLine = z.infer<typeof ControlResponseSchema>;
export type ContentBlock = z.infer<typeof ContentBlockSchema>;
export type ToolUseBlock = z.infer<typeof ToolUseBlockSchema>;
export type ToolResultBlock = z.infer<typeof ToolResultBlockSchema>;
export type KnownLine = z.infer<LineSchemas[SchemaKey]>;
