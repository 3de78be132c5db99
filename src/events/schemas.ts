// The `data` of every event kind: one zod schema each, the types inferred from them. Writers build
// these types and readers get them back from `dataOf`, so a field has one name on both sides.
//
// Unknown fields pass (and are dropped from what `dataOf` returns): a field a newer writer adds never
// fails an older reader. The types stay exact, so writers cannot misspell a field. A field is required
// only when every writer has always set it; anything added later is optional, so a log written
// before it still reads (test/events/fixture-log.test.ts replays one).
import { z as zod } from "zod";
import { failureKindSchema } from "./failures.ts";

const int = zod.number().int();
const nonNegInt = int.nonnegative();

/** The ids an attempt's events carry: its span, and the producer's span it is a child of. */
export const traceIdsSchema = zod.object({
  /** 32 lowercase hex digits. */
  traceId: zod.string().regex(/^[0-9a-f]{32}$/),
  /** The attempt span, 16 lowercase hex digits. */
  spanId: zod.string().regex(/^[0-9a-f]{16}$/),
  /** The producer's span (from the job's traceparent), when there was one. */
  parentSpanId: zod
    .string()
    .regex(/^[0-9a-f]{16}$/)
    .optional(),
});
export type TraceIds = zod.infer<typeof traceIdsSchema>;

/**
 * `cli.line`: one stdout line of the CLI, exactly as printed (scrubbed of secrets unless the worker keeps raw lines).
 */
export const cliLineData = zod.object({
  raw: zod.string(),
  /** Set when the line exceeded the splitter's cap; `raw` is then empty. */
  truncated: zod.object({ byteLength: zod.number(), sha256: zod.string() }).optional(),
});

/** `cli.stderr`: stderr text, scrubbed. */
export const cliStderrData = zod.object({ text: zod.string() });

/** How many labels a turn may carry, and how long a value may be. */
const MAX_LABELS = 16;
const MAX_LABEL_VALUE_CHARS = 200;
const LABEL_NAME = /^[a-z][a-z0-9_.-]{0,62}$/;
// No control, bidi or format characters: a label is shown in listings and grouped by in SQL as written.
const LABEL_VALUE = /^[^\p{Cc}\p{Cf}]*$/u;

/** One label value: short plain text (the same rule where labels are read back, as in an archived summary). */
export const labelValueSchema = zod
  .string()
  .max(MAX_LABEL_VALUE_CHARS)
  .regex(LABEL_VALUE, "a label value may not hold control or format characters");

/** One label name: a lowercase letter, then up to 62 of a-z 0-9 _ . - */
export const labelNameSchema = zod
  .string()
  .regex(LABEL_NAME, "a label name is a lowercase letter, then up to 62 of a-z 0-9 _ . -");

/**
 * A turn's labels (`repo`, `pr`, `team`…): what fleet questions group by. Names are lowercase words;
 * values are short plain text.
 */
export const turnLabelsSchema = zod.record(zod.string(), labelValueSchema).superRefine((labels, context) => {
  const names = Object.keys(labels);
  if (names.length > MAX_LABELS) context.addIssue({ code: "custom", message: `at most ${MAX_LABELS} labels` });
  for (const name of names.filter((candidate) => !LABEL_NAME.test(candidate)))
    context.addIssue({
      code: "custom",
      path: [name],
      message: "a label name is a lowercase letter, then up to 62 of a-z 0-9 _ . -",
    });
});

/** `turn.queued`: a producer queued a turn. */
export const turnQueuedData = zod.object({
  /** The rendered prompt (placeholders filled). */
  prompt: zod.string(),
  cwd: zod.string(),
  model: zod.string().optional(),
  /** W3C traceparent of the producer's active span, when there was one. */
  traceparent: zod.string().optional(),
  idempotencyKey: zod.string().optional(),
  /** Names (never values) of the env overlay; `ref:` marks a worker-env reference. */
  env: zod.array(zod.string()).optional(),
  onLostSession: zod.string().optional(),
  labels: turnLabelsSchema.optional(),
  /** The turn's tenant (its session's). */
  tenant: zod.string().optional(),
});

/**
 * How a warm-mode attempt's CLI process came about: `warm` when the session's kept process answered
 * the turn, else why a process was started for it (none kept here, its options or cwd changed, it
 * died, idled out, was evicted by a cap, the session moved on elsewhere, or the turn runs cold).
 */
export const WARM_STARTS = [
  "warm",
  "none",
  "fingerprint_changed",
  "dead",
  "expired",
  "evicted",
  "moved",
  "supervised",
  "skills",
] as const;

/** `attempt.started`: a worker holds the session's lease and starts the CLI. */
export const attemptStartedData = zod.object({
  worker: zod.string(),
  attempt: nonNegInt,
  cwd: zod.string(),
  model: zod.string().optional(),
  /** The CLI's version (`claude --version`), when the worker could read it. */
  cliVersion: zod.string().optional(),
  /** The CLI's `--max-budget-usd`: the turn's own, or what its tenant had left if that was less. */
  maxBudgetUsd: zod.number().positive().optional(),
  /** The CLI session id passed to --resume, when resuming. */
  resume: zod.string().optional(),
  /** seq of the session.snapshot restored into this run's config home. */
  snapshotSeq: int.positive().optional(),
  traceparent: zod.string().optional(),
  /** The attempt's span ids, so a re-export from the log lands on the same spans. */
  trace: traceIdsSchema.optional(),
  /** Warm sessions only: see WARM_STARTS. */
  warm: zod.enum(WARM_STARTS).optional(),
  /**
   * When resuming: where the CLI session's running total (`total_cost_usd`) stands as the run
   * starts, which its result lines go on from (see costAdded): the total the restored session file
   * holds (the CLI writes it there when its process exits), or a kept warm process's last one.
   * Absent for a fresh session (its count starts at 0) and in logs from before it was recorded.
   */
  costBaseUsd: zod.number().nonnegative().optional(),
  /**
   * Why the attempt starts a fresh CLI session although the session had one: `cwd_changed` (the
   * CLI keeps a session under its cwd's project folder, so a turn in another cwd does not continue it).
   */
  freshReason: zod.string().optional(),
});

/** `cli.exit`: the CLI process ended. */
export const cliExitData = zod.object({
  code: int.nullable(),
  signal: zod.string().nullable(),
  durationMs: zod.number(),
  pid: int.optional(),
});

/** `attempt.abandoned`: the attempt's output does not count (crash, lease lost, retry, cancel…). */
export const attemptAbandonedData = zod.object({
  /** worker_crashed | lease_lost | fenced | shutdown | lock_lost | cancelled | lost_session | <error kind> */
  reason: zod.string(),
  /** The abandoned attempt (a later attempt may record an earlier one). */
  attempt: nonNegInt,
  /** Whether another attempt of the turn follows. */
  retry: zod.boolean(),
  delayMs: zod.number().optional(),
  /** Set when a later attempt records this one (the worker that ran it died). */
  detectedBy: nonNegInt.optional(),
});

/** `turn.finished`: the turn is done; `attempt` names the accepted attempt, whose cli.line events are its output. */
export const turnFinishedData = zod.object({
  attempt: nonNegInt,
  cliSessionId: zod.string().optional(),
  /**
   * What the accepted attempt cost: the rise of its CLI session's running total (see costAdded).
   * Logs written before this was so hold the session's running total here; readers count from the
   * result lines instead.
   */
  costUsd: zod.number().optional(),
  durationMs: zod.number().optional(),
  /** The result text, scrubbed. */
  resultText: zod.string().optional(),
});

/** `turn.failed`: the turn gave up. */
export const turnFailedData = zod.object({
  attempt: nonNegInt,
  /**
   * Why: a kind of the failure table (failures.ts: the classifier's, the runner's, the worker's). A
   * kind older logs hold that is no longer written reads as its successor (LEGACY_FAILURE_KINDS).
   */
  errorKind: failureKindSchema,
  /** A typed error's name and scrubbed message. */
  error: zod.object({ name: zod.string(), message: zod.string() }),
  retryable: zod.boolean(),
});

/** `turn.cancelled`: a producer or operator cancelled the turn. */
export const turnCancelledData = zod.object({
  reason: zod.string().optional(),
  by: zod.string().optional(),
  attempt: nonNegInt.optional(),
});

/**
 * `turn.parked` (fenced): a supervised call waits for an operator with no process, slot or lease held.
 * The attempt's run ended on the CLI's deferral and the session file is in the snapshot before this
 * event; any worker resumes the turn once the request is decided, or denies it at the deadline.
 */
export const turnParkedData = zod.object({
  attempt: nonNegInt,
  /** The `decision.requested` that waits, and its seq. */
  requestId: zod.string(),
  requestSeq: int.positive(),
  tool: zod.string(),
  toolUseId: zod.string(),
  /** sha256 of the deferred call's exact input: the resumed call must carry the same. */
  inputDigest: zod.string(),
  cliSessionId: zod.string(),
  /** When the request is denied unless decided before (ISO). */
  deadline: zod.string(),
  /** How many times the turn has parked, this one included: parked runs do not count as retries. */
  parks: int.positive(),
  /** The queue whose job resumes the turn. */
  queue: zod.string(),
  /** What the turn's parked runs cost so far, this one included: turn.finished adds it to its own run's. */
  costUsd: zod.number().nonnegative().optional(),
});

/** `session.snapshot`: the CLI's session file, saved so any worker can resume the session. */
export const sessionSnapshotData = zod.object({
  cliSessionId: zod.string(),
  /**
   * The file's bytes (scrubbed like cli.line text unless the worker keeps raw lines), base64; with
   * `baseSeq`, only the bytes appended since the snapshot at that seq.
   */
  base64: zod.string(),
  /** Length and sha256 of the whole file. */
  bytes: zod.number(),
  sha256: zod.string(),
  /** The snapshot this one extends (its file is a prefix of this one's). */
  baseSeq: int.positive().optional(),
  /** Deltas back to a whole snapshot (absent: this one is whole). */
  depth: nonNegInt.optional(),
  /** The cwd the CLI ran in: the session file belongs to that cwd's conversation. */
  cwd: zod.string().optional(),
  /** The CLI session's running total (`total_cost_usd` of the run's last result) as of this file. */
  costTotalUsd: zod.number().nonnegative().optional(),
});

/**
 * `session.replaced`: a fresh CLI session took the place of the session's: the CLI lost it
 * (`lost_session`: the log's transcript is restored into the new one) or the turn ran in another cwd
 * than the one it was held in (`cwd_changed`: nothing carried, `turns` 0; the log keeps the history).
 * Logs hold it under its older name `session.replayed` too (see RENAMED_KINDS).
 */
export const sessionReplacedData = zod.object({
  by: zod.string(),
  /** lost_session | cwd_changed */
  reason: zod.string(),
  previousCliSessionId: zod.string().optional(),
  cliSessionId: zod.string().optional(),
  /** Turns whose transcript was carried into the new session's prompt. */
  turns: nonNegInt,
});
/** @deprecated The older name of sessionReplacedData. */
export const sessionReplayedData = sessionReplacedData;

export const riskClassSchema = zod.enum(["exec", "write", "network", "other"]);
export type RiskClass = zod.infer<typeof riskClassSchema>;

export const decisionSchema = zod.enum(["allow", "deny"]);
export type Decision = zod.infer<typeof decisionSchema>;

export const deciderSchema = zod.enum(["operator", "rule", "timeout", "hub"]);

/** `decision.requested` (supervised turns; fenced, written with the attempt's epoch). */
export const decisionRequestedData = zod.object({
  requestId: zod.string(),
  /** Random per hook call, chosen by the forwarder and echoed in the hub's reply. */
  nonce: zod.string(),
  tool: zod.string(),
  toolUseId: zod.string().optional(),
  riskClass: riskClassSchema,
  /** Scrubbed and shortened: what an operator needs to decide, never whole file contents. */
  input: zod.string(),
  /** The exact command, path or URL (scrubbed) an `always` rule is made from; absent when too long. */
  subject: zod.string().optional(),
  /**
   * Names of what the scrubber took out of `input` or `subject` (e.g. `connection_password`): the
   * operator is not shown the exact call, so an allow needs `allowRedacted`. Absent when nothing was.
   */
  redacted: zod.array(zod.string()).optional(),
  cliSessionId: zod.string().optional(),
  hubId: zod.string(),
  timeoutMs: int.positive(),
  expiresAt: zod.string(),
  /**
   * sha256 (hex) of the call's exact input as the CLI gave it (`inputDigest`): what an operator's
   * signature covers, and what a parked call's re-asked input must match on resume.
   */
  inputDigest: zod.string().optional(),
  /** Set when the call may park: unanswered within the answer window, the turn ends its run and waits. */
  parkable: zod.literal(true).optional(),
});

/** `decision.made` (unfenced): an operator's signed decision, or the hub's rule or timeout verdict. */
export const decisionMadeData = zod.object({
  requestId: zod.string(),
  decision: decisionSchema,
  /** Who: the operator's name, `rule:<id>`, or `hub`. */
  by: zod.string(),
  source: deciderSchema,
  reason: zod.string(),
  decidedAt: zod.string(),
  always: zod.boolean().optional(),
  ruleId: zod.string().optional(),
  /** On timeouts: the request is denied and flagged for escalation. */
  timeoutPolicy: zod.literal("escalate").optional(),
  /** The operator allowed a request whose shown input was redacted, knowingly (`--allow-redacted`). */
  allowRedacted: zod.literal(true).optional(),
  /** Operator decisions: sha256 of the request as the hub recorded it. */
  requestDigest: zod.string().optional(),
  /** Operator decisions: the signing key's id and the Ed25519 signature (base64url). */
  keyId: zod.string().optional(),
  signature: zod.string().optional(),
});

/**
 * `decision.applied` (fenced, the resuming attempt's epoch): a parked call's allow was handed to the
 * CLI. An allow is used once: a later run that asks about the same call (a retry after the call ran)
 * asks an operator anew.
 */
export const decisionAppliedData = zod.object({
  requestId: zod.string(),
});

/** `rule.added` (unfenced): a trust rule for later decisions, in the log of the session whose decision made it. */
export const ruleAddedData = zod.object({
  ruleId: zod.string(),
  pattern: zod.string(),
  effect: decisionSchema,
  by: zod.string(),
  reason: zod.string().optional(),
  fromRequest: zod.string().optional(),
  addedAt: zod.string(),
  keyId: zod.string().optional(),
  signature: zod.string().optional(),
});

/**
 * `rule.revoked` (unfenced): an operator took a trust rule out of the fleet's rule store, in the log
 * that recorded its addition (or the session the operator named). Signed when the operator used a key.
 */
export const ruleRevokedData = zod.object({
  ruleId: zod.string(),
  pattern: zod.string(),
  effect: decisionSchema,
  /** Who revoked it. */
  by: zod.string(),
  reason: zod.string().optional(),
  revokedAt: zod.string(),
  /** The operator key that signed this record, and its Ed25519 signature (base64url). */
  keyId: zod.string().optional(),
  signature: zod.string().optional(),
});

/** Token counts of one model call, from the answer's own usage. */
export const modelUsageSchema = zod.object({
  input_tokens: nonNegInt,
  output_tokens: nonNegInt,
  cache_creation_input_tokens: nonNegInt,
  cache_read_input_tokens: nonNegInt,
});

/** `model.call`: one request of the run's CLI through the worker's model gateway, as the gateway saw it. */
export const modelCallData = zod.object({
  /** ISO time the request reached the gateway. */
  startedAt: zod.string(),
  method: zod.string(),
  /** `/v1/messages`, `/v1/messages/count_tokens`, … (no query). */
  path: zod.string(),
  model: zod.string().optional(),
  stream: zod.boolean(),
  /** The status the CLI got. */
  status: int,
  /** Request arrival to the answer's first body byte. */
  ttfbMs: zod.number().optional(),
  durationMs: zod.number(),
  usage: modelUsageSchema.optional(),
  /** An estimate from the gateway's price table (docs/gateway.md). */
  costUsd: zod.number().optional(),
  retryAfterS: zod.number().optional(),
  /** The upstream's `request-id`. */
  requestId: zod.string().optional(),
  /** Set when the gateway answered itself: `policy`, `upstream_unreachable`, `too_large`, `aborted`. */
  answeredBy: zod.string().optional(),
  /** Why the gateway's policy refused the call (`tenant_budget`, …), when it did. */
  refusedFor: zod.string().optional(),
  /** The gateway's id of the call: a tenant's spend counts each id once. */
  callId: zod.string().optional(),
  /** The type of an error event inside a streamed answer (`overloaded_error`, …): failed, though it said 200. */
  streamError: zod
    .string()
    .regex(/^[a-z][a-z_]{0,63}$/)
    .optional(),
});

/** Every kind turnstream writes, with the schema of its data. */
export const eventDataSchemas = {
  "turn.queued": turnQueuedData,
  "attempt.started": attemptStartedData,
  "cli.line": cliLineData,
  "cli.stderr": cliStderrData,
  "cli.exit": cliExitData,
  "attempt.abandoned": attemptAbandonedData,
  "turn.finished": turnFinishedData,
  "turn.failed": turnFailedData,
  "turn.cancelled": turnCancelledData,
  "turn.parked": turnParkedData,
  "session.snapshot": sessionSnapshotData,
  "session.replaced": sessionReplacedData,
  /** The older name of `session.replaced`, which logs already hold: it reads as that kind. */
  "session.replayed": sessionReplacedData,
  "decision.requested": decisionRequestedData,
  "decision.made": decisionMadeData,
  "decision.applied": decisionAppliedData,
  "rule.added": ruleAddedData,
  "rule.revoked": ruleRevokedData,
  "model.call": modelCallData,
} as const;

export type EventKind = keyof typeof eventDataSchemas;
/** The data of an event of kind K. */
export type EventData<K extends EventKind> = zod.output<(typeof eventDataSchemas)[K]>;
/** What a writer passes for kind K. */
export type EventDataInput<K extends EventKind> = zod.input<(typeof eventDataSchemas)[K]>;

export type TurnQueuedData = EventData<"turn.queued">;
export type AttemptStartedData = EventData<"attempt.started">;
export type CliLineData = EventData<"cli.line">;
export type CliStderrData = EventData<"cli.stderr">;
export type CliExitData = EventData<"cli.exit">;
export type AttemptAbandonedData = EventData<"attempt.abandoned">;
export type TurnFinishedData = EventData<"turn.finished">;
export type TurnFailedData = EventData<"turn.failed">;
export type TurnCancelledData = EventData<"turn.cancelled">;
export type TurnParkedData = EventData<"turn.parked">;
export type SessionSnapshotData = EventData<"session.snapshot">;
export type SessionReplacedData = EventData<"session.replaced">;
/** @deprecated The older name of SessionReplacedData. */
export type SessionReplayedData = SessionReplacedData;
export type DecisionRequested = EventData<"decision.requested">;
export type DecisionMade = EventData<"decision.made">;
export type DecisionApplied = EventData<"decision.applied">;
export type RuleAdded = EventData<"rule.added">;
export type RuleRevoked = EventData<"rule.revoked">;
export type ModelCallData = EventData<"model.call">;
