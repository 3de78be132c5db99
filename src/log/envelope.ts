// The envelope every log entry carries (version 1). `seq` and `session` are not stored in the entry:
// they come from the stream id and the key, so a stored entry can never disagree with its position.
import { z } from "zod";
import { SESSION_ID_PATTERN } from "./keys.ts";

export const ENVELOPE_VERSION = 1;

/** Dotted lowercase names: `turn.queued`, `cli.line`, `decision.made`, and any future kind. */
export const KIND_PATTERN = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/;

/** Kinds this module knows by name; any kind matching KIND_PATTERN is storable and readable too. */
export const KNOWN_KINDS = [
  "turn.queued",
  "attempt.started",
  "cli.line",
  "cli.stderr",
  "cli.exit",
  "attempt.abandoned",
  "turn.finished",
  "turn.failed",
  "turn.cancelled",
  "session.snapshot",
  "session.replayed",
  "decision.requested",
  "decision.made",
  "rule.added",
] as const;

/** Kinds that end a turn; when one is the latest turn-state event the session counts as finished. */
export const TERMINAL_KINDS: readonly string[] = ["turn.finished", "turn.failed", "turn.cancelled"];

export const kindSchema = z.string().regex(KIND_PATTERN, "kind must be dotted lowercase, e.g. cli.line");

export const cliInfoSchema = z.looseObject({
  version: z.string().optional(),
  pid: z.number().int().optional(),
});

const cliLineData = z.looseObject({ raw: z.string() });

const base = {
  turn: z.string().max(200),
  attempt: z.number().int().nonnegative(),
  kind: kindSchema,
  data: z.unknown(),
  cli: cliInfoSchema.optional(),
};

function checkData(value: { kind: string; data: unknown }, ctx: z.RefinementCtx): void {
  if (value.kind === "cli.line" && !cliLineData.safeParse(value.data).success) {
    ctx.addIssue({ code: "custom", path: ["data", "raw"], message: "cli.line needs data.raw: the exact line text" });
  }
  if (value.data === undefined) {
    ctx.addIssue({ code: "custom", path: ["data"], message: "data must be JSON (use null for none)" });
  }
}

export const envelopeSchema = z
  .object({
    v: z.literal(ENVELOPE_VERSION),
    seq: z.number().int().positive(),
    session: z.string().regex(SESSION_ID_PATTERN),
    epoch: z.number().int().nonnegative(),
    at: z.string().min(1),
    ...base,
  })
  .superRefine(checkData);

export type Envelope = z.infer<typeof envelopeSchema>;

/** What a caller appends: the log fills in v, seq, session, epoch (and `at` when absent). */
export const eventInputSchema = z
  .object({
    at: z.string().min(1).optional(),
    ...base,
  })
  .superRefine(checkData);

export type EventInput = z.input<typeof eventInputSchema>;

export function issuesOf(error: z.ZodError): string[] {
  return error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`);
}
