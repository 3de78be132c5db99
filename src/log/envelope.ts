// The envelope every log entry carries (version 1). `seq` and `session` are not stored in the entry:
// they come from the stream id and the key, so a stored entry can never disagree with its position.
import { z as zod } from "zod";
import { cliLineData, KIND_PATTERN } from "../events/index.ts";
import { SESSION_ID_PATTERN } from "./keys.ts";

export const ENVELOPE_VERSION = 1;

export const kindSchema = zod.string().regex(KIND_PATTERN, "kind must be dotted lowercase, e.g. cli.line");

export const cliInfoSchema = zod.looseObject({
  version: zod.string().optional(),
  pid: zod.number().int().optional(),
});

/** What every stored cli.line must have: its exact text (the rest of its data is the readers' business). */
const cliLineRaw = cliLineData.pick({ raw: true });

const base = {
  turn: zod.string().max(200),
  attempt: zod.number().int().nonnegative(),
  kind: kindSchema,
  data: zod.unknown(),
  cli: cliInfoSchema.optional(),
};

function checkData(value: { kind: string; data: unknown }, ctx: zod.RefinementCtx): void {
  if (value.kind === "cli.line" && !cliLineRaw.safeParse(value.data).success) {
    ctx.addIssue({ code: "custom", path: ["data", "raw"], message: "cli.line needs data.raw: the exact line text" });
  }
  if (value.data === undefined) {
    ctx.addIssue({ code: "custom", path: ["data"], message: "data must be JSON (use null for none)" });
  }
}

export const envelopeSchema = zod
  .object({
    v: zod.literal(ENVELOPE_VERSION),
    seq: zod.number().int().positive(),
    session: zod.string().regex(SESSION_ID_PATTERN),
    epoch: zod.number().int().nonnegative(),
    at: zod.string().min(1),
    ...base,
  })
  .superRefine(checkData);

export type Envelope = zod.infer<typeof envelopeSchema>;

/** What a caller appends: the log fills in v, seq, session, epoch (and `at` when absent). */
export const eventInputSchema = zod
  .object({
    at: zod.string().min(1).optional(),
    ...base,
  })
  .superRefine(checkData);

export type EventInput = zod.input<typeof eventInputSchema>;

export function issuesOf(error: zod.ZodError): string[] {
  return error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`);
}

// ---- read fast path ----------------------------------------------------------------------------
// A rebuild validates millions of stored envelopes; zod costs about as much as reading them. This
// hand-written check covers the shape the log itself writes and accepts only what envelopeSchema
// accepts (it may be stricter, never looser: test/events/fast-checks.test.ts holds it to that).
// Anything it does not accept goes to zod, which has the last word and gives the issues.

type Rec = Record<string, unknown>;
// Plain objects only (what JSON.parse makes): anything more exotic is left to zod.
const isRec = (v: unknown): v is Rec =>
  v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype;
const isNonNegInt = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

const checkedKinds = new Set<string>();
const checkedSessions = new Set<string>();

function kindOk(kind: unknown): kind is string {
  if (typeof kind !== "string") return false;
  if (checkedKinds.has(kind)) return true;
  if (!KIND_PATTERN.test(kind)) return false;
  if (checkedKinds.size < 256) checkedKinds.add(kind);
  return true;
}

function sessionOk(session: unknown): session is string {
  if (typeof session !== "string") return false;
  if (checkedSessions.has(session)) return true;
  if (!SESSION_ID_PATTERN.test(session)) return false;
  if (checkedSessions.size >= 1024) checkedSessions.clear();
  checkedSessions.add(session);
  return true;
}

function cliOk(cli: unknown): boolean {
  if (cli === undefined) return true;
  if (!isRec(cli)) return false;
  const version = cli["version"];
  const pid = cli["pid"];
  return (version === undefined || typeof version === "string") && (pid === undefined || Number.isSafeInteger(pid));
}

/** The fields an envelope and an event input share (`base`, and checkData's rule for cli.line). */
function baseOk(record: Rec): boolean {
  const { turn, attempt, kind, data } = record;
  if (
    typeof turn !== "string" ||
    turn.length > 200 ||
    !isNonNegInt(attempt) ||
    !kindOk(kind) ||
    data === undefined ||
    !cliOk(record["cli"])
  )
    return false;
  return kind !== "cli.line" || (isRec(data) && typeof data["raw"] === "string");
}

/**
 * The envelope zod would produce for `value` (same keys, same order; unknown keys dropped), when the
 * fast check can vouch for it; undefined means "ask envelopeSchema".
 */
export function fastEnvelope(value: unknown): Envelope | undefined {
  if (!isRec(value) || !baseOk(value)) return undefined;
  const { v: envelopeVersion, seq, session, epoch, at } = value;
  if (
    envelopeVersion !== ENVELOPE_VERSION ||
    !Number.isSafeInteger(seq) ||
    (seq as number) <= 0 ||
    !sessionOk(session) ||
    !isNonNegInt(epoch) ||
    typeof at !== "string" ||
    at.length === 0
  ) {
    return undefined;
  }
  const out: Envelope = {
    v: ENVELOPE_VERSION,
    seq: seq as number,
    session,
    epoch,
    at,
    turn: value["turn"] as string,
    attempt: value["attempt"] as number,
    kind: value["kind"] as string,
    data: value["data"],
  };
  if ("cli" in value) out.cli = value["cli"] as Envelope["cli"];
  return out;
}

/**
 * What eventInputSchema would produce for `value` (the write path's check of every appended event),
 * when the fast check can vouch for it; undefined means "ask eventInputSchema".
 */
export function fastEventInput(value: unknown): zod.output<typeof eventInputSchema> | undefined {
  if (!isRec(value) || !baseOk(value)) return undefined;
  const { at, cli } = value;
  if (("at" in value && (typeof at !== "string" || at.length === 0)) || ("cli" in value && cli === undefined))
    return undefined;
  const base = {
    turn: value["turn"] as string,
    attempt: value["attempt"] as number,
    kind: value["kind"] as string,
    data: value["data"],
  };
  const out: zod.output<typeof eventInputSchema> = at === undefined ? base : { at: at as string, ...base };
  if (cli !== undefined) out.cli = cli as Envelope["cli"];
  return out;
}

export type EnvelopeCheck = { success: true; data: Envelope } | { success: false; issues: string[] };

/** Validates a decoded envelope: the fast check first, envelopeSchema for everything it does not vouch for. */
export function checkEnvelope(value: unknown): EnvelopeCheck {
  const fast = fastEnvelope(value);
  if (fast !== undefined) return { success: true, data: fast };
  const parsed = envelopeSchema.safeParse(value);
  return parsed.success ? { success: true, data: parsed.data } : { success: false, issues: issuesOf(parsed.error) };
}
