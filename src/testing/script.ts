// The model server's script: the JSON a test writes to say what the "model" answers, request by request.
import { TurnstreamError } from "../kernel/index.ts";
import { z as zod } from "zod";

const textBlock = zod.object({ type: zod.literal("text"), text: zod.string() });
const thinkingBlock = zod.object({
  type: zod.literal("thinking"),
  thinking: zod.string(),
  signature: zod.string().optional(),
});
const redactedThinkingBlock = zod.object({ type: zod.literal("redacted_thinking"), data: zod.string().optional() });
const toolUseBlock = zod.object({
  type: zod.literal("tool_use"),
  name: zod.string().min(1),
  input: zod.record(zod.string(), zod.unknown()),
  id: zod.string().optional(),
});
export const blockSchema = zod.discriminatedUnion("type", [
  textBlock,
  thinkingBlock,
  redactedThinkingBlock,
  toolUseBlock,
]);
export type ScriptBlock = zod.infer<typeof blockSchema>;

const usageSchema = zod.object({
  input_tokens: zod.number().int().nonnegative().optional(),
  output_tokens: zod.number().int().nonnegative().optional(),
  cache_creation_input_tokens: zod.number().int().nonnegative().optional(),
  cache_read_input_tokens: zod.number().int().nonnegative().optional(),
});
export type ScriptUsage = zod.infer<typeof usageSchema>;

/**
 * What the request a response answers must carry: the results of the previous response's tool calls,
 * each by id with the sha256 of its text after `normaliseRunText` (see ./normalise.ts) and its error
 * flag. A request that differs gets a scripted error instead: the run has parted from the recording.
 */
const expectSchema = zod.strictObject({
  toolResults: zod.array(
    zod.strictObject({
      toolUseId: zod.string().min(1),
      name: zod.string().optional(),
      sha256: zod.string().regex(/^[0-9a-f]{64}$/),
      isError: zod.boolean(),
    }),
  ),
});
/** A response's `expect`: the tool results (by id, digest and error flag) its request must carry. */
export type ScriptExpect = zod.infer<typeof expectSchema>;

const common = { match: zod.string().min(1).optional(), expect: expectSchema.optional() };

const contentResponse = zod.strictObject({
  ...common,
  content: zod.array(blockSchema).min(1),
  stopReason: zod.enum(["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]).optional(),
  usage: usageSchema.optional(),
  delayMs: zod.number().int().nonnegative().optional(),
  chunkDelayMs: zod.number().int().nonnegative().optional(),
});
const errorResponse = zod.strictObject({
  ...common,
  error: zod.strictObject({
    status: zod.number().int().min(400).max(599),
    type: zod.string().min(1),
    message: zod.string(),
    headers: zod.record(zod.string(), zod.string()).optional(),
  }),
  delayMs: zod.number().int().nonnegative().optional(),
  /** Answers every request (that it matches) for this long after its first one, then gives way to the next response. */
  forMs: zod.number().int().positive().optional(),
});
const streamErrorResponse = zod.strictObject({
  ...common,
  streamError: zod.strictObject({ type: zod.string().min(1), message: zod.string() }),
  afterBlocks: zod.number().int().nonnegative().optional(),
  content: zod.array(blockSchema).optional(),
});
const hangResponse = zod.strictObject({ ...common, hang: zod.literal(true) });

export const responseSchema = zod.union([contentResponse, errorResponse, streamErrorResponse, hangResponse]);
export type ScriptResponse = zod.infer<typeof responseSchema>;
export type ContentResponse = zod.infer<typeof contentResponse>;

export const scriptSchema = zod.strictObject({
  responses: zod.array(responseSchema),
  /**
   * `done` (default): a request after the last response gets the text `done`; `error`: a scripted error saying the
   * script has no more.
   */
  exhausted: zod.enum(["done", "error"]).optional(),
  /** The run's working directory: where `expect` checks normalise it to `<cwd>`. */
  cwd: zod.string().min(1).optional(),
});
export type Script = zod.infer<typeof scriptSchema>;

export class InvalidScriptError extends TurnstreamError {
  readonly issues: readonly string[];
  constructor(issues: string[]) {
    super(`invalid model-server script: ${issues.join("; ")}`, { code: "invalid_script" });
    this.issues = issues;
  }
}

// A plain union only says "Invalid input" at responses.N; picking the branch by its tell-tale key first
// lets the error name the field that is wrong (e.g. responses.2.error.status).
function branchFor(response: unknown): zod.ZodType {
  if (response === null || typeof response !== "object") return responseSchema;
  if ("hang" in response) return hangResponse;
  if ("streamError" in response) return streamErrorResponse;
  if ("error" in response) return errorResponse;
  if ("content" in response) return contentResponse;
  return responseSchema;
}

const formatIssues = (issues: readonly zod.core.$ZodIssue[], prefix: PropertyKey[]): string[] =>
  issues.map((issue) => {
    const path = [...prefix, ...issue.path].map(String);
    return `${path.length ? path.join(".") : "(root)"}: ${issue.message}`;
  });

/** Validates a script; the error names each offending field path (e.g. `responses.2.error.status`). */
export function parseScript(input: unknown): Script {
  const shape = scriptSchema.extend({ responses: zod.array(zod.unknown()) }).safeParse(input);
  if (!shape.success) throw new InvalidScriptError(formatIssues(shape.error.issues, []));
  const issues: string[] = [];
  shape.data.responses.forEach((response, position) => {
    const result = branchFor(response).safeParse(response);
    if (!result.success) issues.push(...formatIssues(result.error.issues, ["responses", position]));
  });
  if (issues.length > 0) throw new InvalidScriptError(issues);
  return scriptSchema.parse(input);
}
