// The `data` shapes the projector reads from each event kind the worker, producer and decision hub
// write. Every schema is loose and every field optional: the reducer takes what it understands and
// carries the rest, so a writer may add fields freely and an old log never breaks a newer reducer.
// Writers: follow these names; `attempt` in data is only a fallback for the envelope's own field.
import { z } from "zod";

const optStr = z.string().optional();
const optNum = z.number().optional();

/** `cli.line`: one stdout line of the CLI, exactly as printed (envelope.ts requires `raw`). */
export const cliLineData = z.looseObject({
  raw: z.string(),
  /** Set when the line exceeded the splitter's cap and `raw` is empty. */
  truncated: z.looseObject({ byteLength: optNum, sha256: optStr }).optional(),
});

/** `cli.stderr`: stderr text. The projector only counts it (stderr may hold secrets). */
export const cliStderrData = z.looseObject({ raw: optStr, text: optStr });

/** `turn.queued`: the producer queued a turn. */
export const turnQueuedData = z.looseObject({
  /** The user's prompt (rendered as the turn's first message). */
  prompt: optStr,
  cwd: optStr,
  model: optStr,
  /** Resume an existing CLI session (continuation turn). */
  resume: optStr,
  /** supervised | unsupervised */
  mode: optStr,
});

/** `attempt.started`: a worker leased the session and is about to spawn the CLI. */
export const attemptStartedData = z.looseObject({
  worker: optStr,
  cwd: optStr,
  model: optStr,
  /** The CLI session id passed to --resume, when resuming. */
  resume: optStr,
  cliVersion: optStr,
});

/** `cli.exit`: the CLI process ended. */
export const cliExitData = z.looseObject({
  code: z.number().int().nullable().optional(),
  signal: z.string().nullable().optional(),
  durationMs: optNum,
});

/** `attempt.abandoned`: the attempt's output must not count (crash, lease lost, watchdog kill…). */
export const attemptAbandonedData = z.looseObject({
  /** e.g. worker_crashed | lease_lost | timeout | fenced | shutdown */
  reason: optStr,
  attempt: z.number().int().optional(),
  retry: z.boolean().optional(),
});

/** `turn.finished`: the turn is done; `attempt` names the accepted attempt (default: envelope's). */
export const turnFinishedData = z.looseObject({
  attempt: z.number().int().optional(),
  errorKind: optStr,
  costUsd: optNum,
  cliSessionId: optStr,
});

/** `turn.failed`: the turn gave up. `error` holds a typed error's name and scrubbed message. */
export const turnFailedData = z.looseObject({
  attempt: z.number().int().optional(),
  errorKind: optStr,
  error: z.union([z.looseObject({ name: optStr, message: optStr }), z.string()]).optional(),
  retryable: z.boolean().optional(),
});

/** `turn.cancelled`: an operator or producer cancelled the turn. */
export const turnCancelledData = z.looseObject({ reason: optStr, by: optStr });

/** `session.snapshot`: the CLI session file was saved (so another worker can resume it). */
export const sessionSnapshotData = z.looseObject({
  cliSessionId: optStr,
  bytes: optNum,
  sha256: optStr,
  ref: optStr,
});

/** `session.replayed`: someone replayed the session (audit fact). */
export const sessionReplayedData = z.looseObject({ by: optStr, until: z.union([z.number(), z.string()]).optional() });

/** `decision.requested` (supervised mode): the hub asked for a permission decision. */
export const decisionRequestedData = z.looseObject({
  requestId: z.string(),
  toolName: optStr,
  toolUseId: optStr,
  /** A short, scrubbed description of the call (never the full input). */
  summary: optStr,
  input: z.unknown().optional(),
  /** ISO time after which the hub answers by itself (deny). */
  deadline: optStr,
});

/** `decision.made`: someone (or a rule, or a timeout) answered a request. */
export const decisionMadeData = z.looseObject({
  requestId: z.string(),
  /** allow | deny | ask … */
  decision: z.string(),
  /** user:<name> | rule:<id> | timeout | hub */
  by: optStr,
  reason: optStr,
  ruleId: optStr,
});

/** `rule.added`: a trust rule for later decisions. */
export const ruleAddedData = z.looseObject({
  ruleId: optStr,
  tool: optStr,
  pattern: optStr,
  decision: optStr,
  by: optStr,
});

/** Schemas by kind, for writers' tests and the reducer. */
export const eventDataSchemas = {
  "cli.line": cliLineData,
  "cli.stderr": cliStderrData,
  "turn.queued": turnQueuedData,
  "attempt.started": attemptStartedData,
  "cli.exit": cliExitData,
  "attempt.abandoned": attemptAbandonedData,
  "turn.finished": turnFinishedData,
  "turn.failed": turnFailedData,
  "turn.cancelled": turnCancelledData,
  "session.snapshot": sessionSnapshotData,
  "session.replayed": sessionReplayedData,
  "decision.requested": decisionRequestedData,
  "decision.made": decisionMadeData,
  "rule.added": ruleAddedData,
} as const;

export type EventDataKind = keyof typeof eventDataSchemas;
export type EventData<K extends EventDataKind> = z.infer<(typeof eventDataSchemas)[K]>;

// Hand-written check of the same shapes for the hot path (a rebuild reads millions of events): the
// top-level fields' types only, which is all these loose schemas check apart from nested objects,
// whose kinds fall through to zod. Anything the fast check does not accept is decided by zod.
type FieldType = "string" | "number" | "int" | "boolean" | "int|null" | "string|null";
const fast: Partial<Record<EventDataKind, Record<string, FieldType>>> = {
  "turn.queued": { prompt: "string", cwd: "string", model: "string", resume: "string", mode: "string" },
  "attempt.started": { worker: "string", cwd: "string", model: "string", resume: "string", cliVersion: "string" },
  "cli.exit": { code: "int|null", signal: "string|null", durationMs: "number" },
  "attempt.abandoned": { reason: "string", attempt: "int", retry: "boolean" },
  "turn.finished": { attempt: "int", errorKind: "string", costUsd: "number", cliSessionId: "string" },
  "turn.cancelled": { reason: "string", by: "string" },
  "session.snapshot": { cliSessionId: "string", bytes: "number", sha256: "string", ref: "string" },
};

function fits(v: unknown, t: FieldType): boolean {
  if (v === undefined) return true;
  switch (t) {
    case "string":
      return typeof v === "string";
    case "number":
      return typeof v === "number";
    case "int":
      return Number.isInteger(v);
    case "boolean":
      return typeof v === "boolean";
    case "int|null":
      return v === null || Number.isInteger(v);
    case "string|null":
      return v === null || typeof v === "string";
  }
}

/** Data of an event as its kind's shape, or undefined when it does not fit (the event is then counted as malformed). */
export function dataOf<K extends EventDataKind>(kind: K, data: unknown): EventData<K> | undefined {
  const spec = fast[kind];
  const obj = data ?? {};
  if (spec !== undefined && typeof obj === "object" && !Array.isArray(obj)) {
    const o = obj as Record<string, unknown>;
    let ok = true;
    for (const f in spec) {
      if (!fits(o[f], spec[f]!)) {
        ok = false;
        break;
      }
    }
    if (ok) return o as EventData<K>;
  }
  const r = eventDataSchemas[kind].safeParse(obj);
  return r.success ? (r.data as EventData<K>) : undefined;
}
