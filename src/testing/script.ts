// The model server's script: the JSON a test writes to say what the "model" answers, request by request.
import { TurnstreamError } from "../kernel/index.ts";
import { z } from "zod";

const textBlock = z.object({ type: z.literal("text"), text: z.string() });
const thinkingBlock = z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string().optional() });
const redactedThinkingBlock = z.object({ type: z.literal("redacted_thinking"), data: z.string().optional() });
const toolUseBlock = z.object({
  type: z.literal("tool_use"),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
  id: z.string().optional(),
});
export const blockSchema = z.discriminatedUnion("type", [
  textBlock,
  thinkingBlock,
  redactedThinkingBlock,
  toolUseBlock,
]);
export type ScriptBlock = z.infer<typeof blockSchema>;

const usageSchema = z.object({
  input_tokens: z.number().int().nonnegative().optional(),
  output_tokens: z.number().int().nonnegative().optional(),
  cache_creation_input_tokens: z.number().int().nonnegative().optional(),
  cache_read_input_tokens: z.number().int().nonnegative().optional(),
});
export type ScriptUsage = z.infer<typeof usageSchema>;

/**
 * What the request a response answers must carry: the results of the previous response's tool calls,
 * each by id with the sha256 of its text after `normaliseRunText` (see ./normalise.ts) and its error
 * flag. A request that differs gets a scripted error instead: the run has parted from the recording.
 */
const expectSchema = z.strictObject({
  toolResults: z.array(
    z.strictObject({
      toolUseId: z.string().min(1),
      name: z.string().optional(),
      sha256: z.string().regex(/^[0-9a-f]{64}$/),
      isError: z.boolean(),
    }),
  ),
});
/** A response's `expect`: the tool results (by id, digest and error flag) its request must carry. */
export type ScriptExpect = z.infer<typeof expectSchema>;

const common = { match: z.string().min(1).optional(), expect: expectSchema.optional() };

const contentResponse = z.strictObject({
  ...common,
  content: z.array(blockSchema).min(1),
  stopReason: z.enum(["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]).optional(),
  usage: usageSchema.optional(),
  delayMs: z.number().int().nonnegative().optional(),
  chunkDelayMs: z.number().int().nonnegative().optional(),
});
const errorResponse = z.strictObject({
  ...common,
  error: z.strictObject({
    status: z.number().int().min(400).max(599),
    type: z.string().min(1),
    message: z.string(),
    headers: z.record(z.string(), z.string()).optional(),
  }),
  delayMs: z.number().int().nonnegative().optional(),
});
const streamErrorResponse = z.strictObject({
  ...common,
  streamError: z.strictObject({ type: z.string().min(1), message: z.string() }),
  afterBlocks: z.number().int().nonnegative().optional(),
  content: z.array(blockSchema).optional(),
});
const hangResponse = z.strictObject({ ...common, hang: z.literal(true) });

export const responseSchema = z.union([contentResponse, errorResponse, streamErrorResponse, hangResponse]);
export type ScriptResponse = z.infer<typeof responseSchema>;
export type ContentResponse = z.infer<typeof contentResponse>;

export const scriptSchema = z.strictObject({
  responses: z.array(responseSchema),
  /** `done` (default): a request after the last response gets the text `done`; `error`: a scripted error saying the script has no more. */
  exhausted: z.enum(["done", "error"]).optional(),
  /** The run's working directory: where `expect` checks normalise it to `<cwd>`. */
  cwd: z.string().min(1).optional(),
});
export type Script = z.infer<typeof scriptSchema>;

export class InvalidScriptError extends TurnstreamError {
  readonly issues: readonly string[];
  constructor(issues: string[]) {
    super(`invalid model-server script: ${issues.join("; ")}`, { code: "invalid_script" });
    this.issues = issues;
  }
}

// A plain union only says "Invalid input" at responses.N; picking the branch by its tell-tale key first
// lets the error name the field that is wrong (e.g. responses.2.error.status).
function branchFor(r: unknown): z.ZodType {
  if (r === null || typeof r !== "object") return responseSchema;
  if ("hang" in r) return hangResponse;
  if ("streamError" in r) return streamErrorResponse;
  if ("error" in r) return errorResponse;
  if ("content" in r) return contentResponse;
  return responseSchema;
}

const formatIssues = (issues: readonly z.core.$ZodIssue[], prefix: PropertyKey[]): string[] =>
  issues.map((i) => {
    const path = [...prefix, ...i.path].map(String);
    return `${path.length ? path.join(".") : "(root)"}: ${i.message}`;
  });

/** Validates a script; the error names each offending field path (e.g. `responses.2.error.status`). */
export function parseScript(input: unknown): Script {
  const shape = scriptSchema.extend({ responses: z.array(z.unknown()) }).safeParse(input);
  if (!shape.success) throw new InvalidScriptError(formatIssues(shape.error.issues, []));
  const issues: string[] = [];
  shape.data.responses.forEach((r, n) => {
    const result = branchFor(r).safeParse(r);
    if (!result.success) issues.push(...formatIssues(result.error.issues, ["responses", n]));
  });
  if (issues.length > 0) throw new InvalidScriptError(issues);
  return scriptSchema.parse(input);
}
