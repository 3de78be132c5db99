// zod schemas for every line the CLI prints with `--output-format stream-json --verbose`.
// All objects are loose so fields a newer CLI adds survive a parse and reach the log unchanged.
// Schemas check only what our code relies on: the parser must accept every line the CLI can
// print, and validating deeper would only turn new CLI versions into "unknown" lines.
import { z as zod } from "zod";

const str = zod.string();
const optStr = zod.string().optional();
const nullableStr = zod.string().nullable().optional();
const optNum = zod.number().optional();

export const ContentBlockSchema = zod.looseObject({ type: str });
export const TextBlockSchema = zod.looseObject({ type: zod.literal("text"), text: str });
export const ThinkingBlockSchema = zod.looseObject({ type: zod.literal("thinking"), thinking: optStr });
export const ToolUseBlockSchema = zod.looseObject({
  type: zod.literal("tool_use"),
  id: str,
  name: str,
  input: zod.unknown(),
});
export const ToolResultBlockSchema = zod.looseObject({
  type: zod.literal("tool_result"),
  tool_use_id: str,
  content: zod.unknown().optional(),
  is_error: zod.boolean().optional(),
});

const common = {
  session_id: optStr,
  uuid: optStr,
};

const systemBase = <S extends string>(subtype: S) => ({
  type: zod.literal("system"),
  subtype: zod.literal(subtype),
  ...common,
});

export const SystemInitSchema = zod.looseObject({
  ...systemBase("init"),
  cwd: optStr,
  model: optStr,
  tools: zod.array(str).optional(),
  permissionMode: optStr,
  claude_code_version: optStr,
  apiKeySource: optStr,
});
export const SystemApiRetrySchema = zod.looseObject({
  ...systemBase("api_retry"),
  attempt: optNum,
  max_retries: optNum,
  retry_delay_ms: optNum,
  error_status: zod.number().nullable().optional(),
  error: zod.unknown().optional(),
});
export const SystemStatusSchema = zod.looseObject({ ...systemBase("status"), status: zod.unknown().optional() });
export const SystemThinkingTokensSchema = zod.looseObject({ ...systemBase("thinking_tokens") });
export const SystemPermissionDeniedSchema = zod.looseObject({ ...systemBase("permission_denied") });
export const SystemHookStartedSchema = zod.looseObject({
  ...systemBase("hook_started"),
  hook_id: optStr,
  hook_name: optStr,
  hook_event: optStr,
});
export const SystemHookResponseSchema = zod.looseObject({
  ...systemBase("hook_response"),
  hook_id: optStr,
  hook_name: optStr,
  hook_event: optStr,
  outcome: optStr,
  exit_code: zod.number().nullable().optional(),
});
export const SystemTaskStartedSchema = zod.looseObject({
  ...systemBase("task_started"),
  task_id: optStr,
  tool_use_id: nullableStr,
  description: optStr,
});
export const SystemTaskProgressSchema = zod.looseObject({
  ...systemBase("task_progress"),
  task_id: optStr,
  tool_use_id: nullableStr,
});
export const SystemTaskUpdatedSchema = zod.looseObject({ ...systemBase("task_updated"), task_id: optStr });
export const SystemTaskNotificationSchema = zod.looseObject({
  ...systemBase("task_notification"),
  task_id: optStr,
  tool_use_id: nullableStr,
  status: optStr,
});
export const SystemBackgroundTasksChangedSchema = zod.looseObject({ ...systemBase("background_tasks_changed") });
export const SystemCompactBoundarySchema = zod.looseObject({
  ...systemBase("compact_boundary"),
  compact_metadata: zod.looseObject({}).optional(),
});

export const AssistantSchema = zod.looseObject({
  type: zod.literal("assistant"),
  message: zod.looseObject({
    id: optStr,
    model: optStr,
    role: optStr,
    content: zod.array(ContentBlockSchema),
    stop_reason: nullableStr,
    usage: zod.unknown().optional(),
  }),
  parent_tool_use_id: nullableStr,
  // Set on the synthetic line the CLI prints when the API call failed.
  error: optStr,
  ...common,
});

export const UserSchema = zod.looseObject({
  type: zod.literal("user"),
  message: zod.looseObject({
    role: optStr,
    content: zod.union([str, zod.array(ContentBlockSchema)]),
  }),
  parent_tool_use_id: nullableStr,
  // An object on success, a string on failure (measured).
  tool_use_result: zod.unknown().optional(),
  ...common,
});

export const StreamEventSchema = zod.looseObject({
  type: zod.literal("stream_event"),
  event: zod.looseObject({ type: str }),
  parent_tool_use_id: nullableStr,
  ...common,
});

export const ResultSchema = zod.looseObject({
  type: zod.literal("result"),
  subtype: str,
  is_error: zod.boolean().optional(),
  result: optStr,
  errors: zod.array(zod.unknown()).optional(),
  terminal_reason: nullableStr,
  api_error_status: zod.number().nullable().optional(),
  num_turns: optNum,
  total_cost_usd: optNum,
  duration_ms: optNum,
  permission_denials: zod.array(zod.unknown()).optional(),
  ...common,
});

export const RateLimitEventSchema = zod.looseObject({
  type: zod.literal("rate_limit_event"),
  rate_limit_info: zod.looseObject({}).optional(),
  ...common,
});

export const ControlRequestSchema = zod.looseObject({
  type: zod.literal("control_request"),
  request_id: str,
  request: zod.looseObject({ subtype: str }),
});

export const ControlResponseSchema = zod.looseObject({
  type: zod.literal("control_response"),
  response: zod.looseObject({ subtype: str, request_id: optStr }),
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

export type SystemInitLine = zod.infer<typeof SystemInitSchema>;
export type SystemApiRetryLine = zod.infer<typeof SystemApiRetrySchema>;
export type AssistantLine = zod.infer<typeof AssistantSchema>;
export type UserLine = zod.infer<typeof UserSchema>;
export type StreamEventLine = zod.infer<typeof StreamEventSchema>;
export type ResultLine = zod.infer<typeof ResultSchema>;
export type RateLimitEventLine = zod.infer<typeof RateLimitEventSchema>;
export type ControlRequestLine = zod.infer<typeof ControlRequestSchema>;
export type ControlResponseLine = zod.infer<typeof ControlResponseSchema>;
export type ContentBlock = zod.infer<typeof ContentBlockSchema>;
export type ToolUseBlock = zod.infer<typeof ToolUseBlockSchema>;
export type ToolResultBlock = zod.infer<typeof ToolResultBlockSchema>;
export type KnownLine = zod.infer<LineSchemas[SchemaKey]>;
