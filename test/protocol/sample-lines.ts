// Hand-written stream-json lines shaped like the real CLI's output (DESIGN.md, CLI 2.1.332), for
// unit tests that need a specific case. Fixture files recorded from the real CLI cover the rest.
const sid = "3f1c2a9e-1111-4222-8333-944455556666";
const json = (o: unknown): string => JSON.stringify(o);

export const init = json({
  type: "system",
  subtype: "init",
  cwd: "/work/x",
  session_id: sid,
  tools: ["Bash", "Read", "Write", "Edit", "Skill"],
  mcp_servers: [],
  model: "claude-sonnet-4-5",
  permissionMode: "bypassPermissions",
  slash_commands: [],
  apiKeySource: "ANTHROPIC_API_KEY",
  claude_code_version: "2.1.332",
  output_style: "default",
  uuid: "u-init",
});

const assistantBlock = (msgId: string, block: unknown, extra: Record<string, unknown> = {}): string =>
  json({
    type: "assistant",
    message: {
      id: msgId,
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5",
      content: [block],
      stop_reason: null,
      usage: { input_tokens: 10, output_tokens: 1 },
    },
    parent_tool_use_id: null,
    session_id: sid,
    uuid: `u-${msgId}-${Math.abs(JSON.stringify(block).length)}`,
    ...extra,
  });

const toolResult = (
  id: string,
  content: unknown,
  opts: { isError?: boolean; tur?: unknown; parent?: string } = {},
): string =>
  json({
    type: "user",
    message: {
      role: "user",
      content: [{ tool_use_id: id, type: "tool_result", content, is_error: opts.isError ? true : undefined }],
    },
    parent_tool_use_id: opts.parent ?? null,
    session_id: sid,
    uuid: `u-r-${id}`,
    tool_use_result: opts.tur ?? (opts.isError ? `Error: ${String(content)}` : { stdout: String(content), stderr: "" }),
  });

export const thinking = assistantBlock("msg_1", { type: "thinking", thinking: "secret plan", signature: "sig" });
export const text1 = assistantBlock("msg_1", { type: "text", text: "I'll run `rm -rf /` no wait, ls." });
export const bashUse = assistantBlock("msg_1", {
  type: "tool_use",
  id: "toolu_bash1",
  name: "Bash",
  input: { command: "ls -la", description: "List files" },
});
export const readUse = assistantBlock("msg_1", {
  type: "tool_use",
  id: "toolu_read1",
  name: "Read",
  input: { file_path: "/work/x/.skills/deploy/SKILL.md" },
});
// Completion order: the Read finishes before the Bash.
export const readResult = toolResult("toolu_read1", "     1\t# Deploy skill\n", {
  tur: { type: "text", file: { filePath: "/work/x/.skills/deploy/SKILL.md", content: "# Deploy skill\n" } },
});
export const bashResult = toolResult("toolu_bash1", "total 0\nfile.txt");
export const text2 = assistantBlock("msg_2", { type: "text", text: "Done." });
export const success = json({
  type: "result",
  subtype: "success",
  is_error: false,
  duration_ms: 1200,
  duration_api_ms: 900,
  num_turns: 2,
  result: "Done.",
  session_id: sid,
  total_cost_usd: 0.01,
  usage: { input_tokens: 100, output_tokens: 20 },
  permission_denials: [],
  terminal_reason: "completed",
  uuid: "u-result",
});

export const toolsRun = [init, thinking, text1, bashUse, readUse, readResult, bashResult, text2, success];

export const failingBashUse = assistantBlock("msg_3", {
  type: "tool_use",
  id: "toolu_fail",
  name: "Bash",
  input: { command: "false" },
});
export const failingBashResult = toolResult("toolu_fail", "Exit code 1", { isError: true });

export const apiRetry = (status: number, error: string, attempt = 1): string =>
  json({
    type: "system",
    subtype: "api_retry",
    attempt,
    max_retries: 2,
    retry_delay_ms: 1500,
    error_status: status,
    error,
    session_id: sid,
    uuid: `u-retry-${attempt}`,
  });

export const synthetic = (error: string, text: string): string =>
  json({
    type: "assistant",
    message: {
      id: "msg_synth",
      model: "<synthetic>",
      role: "assistant",
      type: "message",
      content: [{ type: "text", text }],
      stop_reason: "stop_sequence",
      usage: { input_tokens: 0, output_tokens: 0 },
    },
    parent_tool_use_id: null,
    session_id: sid,
    uuid: "u-synth",
    error,
  });

export const apiErrorResult = (status: number, text: string): string =>
  json({
    type: "result",
    subtype: "success",
    is_error: true,
    duration_ms: 10,
    num_turns: 1,
    result: text,
    session_id: sid,
    total_cost_usd: 0,
    terminal_reason: "api_error",
    api_error_status: status,
    uuid: "u-res-err",
  });

export const rateLimitEvent = json({
  type: "rate_limit_event",
  rate_limit_info: { status: "rejected", resetsAt: 1767225600, rateLimitType: "five_hour" },
  session_id: sid,
  uuid: "u-rl",
});

export const lostSession = json({
  type: "result",
  subtype: "error_during_execution",
  duration_ms: 0,
  duration_api_ms: 0,
  is_error: true,
  num_turns: 0,
  session_id: "9d9d9d9d-0000-4000-8000-000000000000",
  total_cost_usd: 0,
  errors: ["No conversation found with session ID: 11111111-2222-4333-8444-555555555555"],
  uuid: "u-lost",
});

export const maxTurns = json({
  type: "result",
  subtype: "error_max_turns",
  is_error: true,
  num_turns: 2,
  session_id: sid,
  terminal_reason: "max_turns",
  uuid: "u-mt",
});

export { sid };
