// The producer: enqueue, cancel and follow turns. One BullMQ job per turn (jobId = turn id, so the
// same idempotency key enqueues once); the session's pending list fixes the order; `turn.queued` in
// the session log records the rendered prompt and the producer's trace context.
import { context, propagation, trace } from "@opentelemetry/api";
import { Job, Queue } from "bullmq";
import { createEventLog, DEFAULT_PREFIX, type Envelope, type EventLog, type Logger, type RedisClient } from "../log/index.ts";
import { bullConnection } from "./connection.ts";
import { InvalidTurnError, UnknownTurnError, WaitTimeoutError } from "./errors.ts";
import { isTerminalKind, type TurnCancelledData, type TurnQueuedData } from "../events/index.ts";
import { queuedWriter, sessionId, turnId } from "./ids.ts";
import { assertQueuePrefix, DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX } from "./keys.ts";
import { SessionFollowers } from "./follow.ts";
import { SessionOrder } from "./order.ts";
import { checkAllowEnv, firstRefusedEnvName } from "./env-policy.ts";
import { enqueueInputSchema, JOB_VERSION, parseOrThrow, renderPrompt, turnJobSchema, type EnqueueInput, type TurnJob } from "./schema.ts";
import { secretShapeIn } from "../telemetry/patterns.ts";

export interface QueueConfig {
  /** Client for the log and the ordering scripts (BullMQ gets a duplicate that retries forever). */
  redis: RedisClient;
  /** Event log key prefix (default "ts:"). */
  logPrefix?: string;
  /** BullMQ prefix: one hash tag, default "{turnstream}". */
  queuePrefix?: string;
  queueName?: string;
  logger?: Logger;
  /**
   * Env names a turn's overlay may set although they are refused by default (PATH, ANTHROPIC_BASE_URL,
   * proxies: see ALLOWABLE_ENV_NAMES). Workers check again with their own TURNSTREAM_ALLOW_ENV.
   */
  allowEnv?: readonly string[];
}

export interface EnqueueResult {
  session: string;
  turn: string;
  jobId: string;
  /** seq of the turn's turn.queued event. */
  queuedSeq: number;
  /** False when the idempotency key had already enqueued this turn. */
  created: boolean;
}

export type TurnStatus = "finished" | "failed" | "cancelled";

export interface TurnResult {
  session: string;
  turn: string;
  status: TurnStatus;
  /** The terminal event (turn.finished / turn.failed / turn.cancelled). */
  event: Envelope;
  /** The attempt whose output counts (finished), or the last one. */
  attempt: number;
  /** The `result` text of the accepted attempt's last result line. */
  resultText: string | undefined;
  cliSessionId: string | undefined;
  errorKind: string | undefined;
}

export interface WaitOptions {
  /** Needed only when the turn's job record is gone (retention). */
  session?: string;
  /** Every event of this turn, in log order, as it is appended. */
  onEvent?: (event: Envelope) => void;
  /** Aborting it stops the wait (rejects). */
  signal?: AbortSignal;
  /** Gives up with a WaitTimeoutError after this long (the turn goes on). */
  timeoutMs?: number;
}

export interface CancelResult {
  session: string;
  turn: string;
  /** cancelled: it will not run (recorded now); requested: it is running, its worker ends it; too_late: it already ended. */
  outcome: "cancelled" | "requested" | "too_late";
}

export interface Producer {
  enqueueTurn(input: EnqueueInput): Promise<EnqueueResult>;
  cancelTurn(turn: string, options?: { session?: string; reason?: string; by?: string }): Promise<CancelResult>;
  waitForTurn(turn: string, options?: WaitOptions): Promise<TurnResult>;
  readonly queue: Queue;
  readonly log: EventLog;
  readonly order: SessionOrder;
  close(): Promise<void>;
}

/** How many of its own latest turns a producer remembers the session and turn.queued seq of. */
const OWN_TURNS_KEPT = 10_000;

/** Job retention: long enough for waitForTurn/cancelTurn to find the session of a recent turn. */
export const JOB_RETENTION = { removeOnComplete: { age: 7 * 86400, count: 100000 }, removeOnFail: { age: 30 * 86400 } };

export function activeTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  if (typeof carrier["traceparent"] === "string") return carrier["traceparent"];
  // No propagator registered: format the active span's context ourselves (W3C).
  const sc = trace.getActiveSpan()?.spanContext();
  if (sc === undefined || !trace.isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

export function createTurnQueue(config: QueueConfig): Queue {
  const prefix = config.queuePrefix ?? DEFAULT_QUEUE_PREFIX;
  assertQueuePrefix(prefix);
  return new Queue(config.queueName ?? DEFAULT_QUEUE_NAME, { connection: bullConnection(config.redis) as never, prefix });
}

/** Key of the turn → session record (kept as long as job records are, outlives a removed job). */
export function turnRecordKey(queuePrefix: string, turn: string): string {
  return `${queuePrefix}:turn:${turn}`;
}

/** Closes a queue from createTurnQueue and the connection it was given (BullMQ leaves a passed-in client open). */
export async function closeTurnQueue(queue: Queue): Promise<void> {
  await queue.close();
  await (queue.opts.connection as RedisClient).quit().catch(() => undefined);
}

export async function sessionOfTurn(queue: Queue, turn: string, redis?: RedisClient): Promise<{ session: string; queuedSeq: number } | undefined> {
  if (redis !== undefined) {
    const rec = await redis.get(turnRecordKey(queue.opts.prefix ?? DEFAULT_QUEUE_PREFIX, turn));
    if (rec !== null) {
      const at = rec.lastIndexOf("|");
      return { session: rec.slice(0, at), queuedSeq: Number(rec.slice(at + 1)) || 1 };
    }
  }
  const job = await Job.fromId(queue, turn).catch(() => undefined);
  const data = job?.data as Partial<TurnJob> | undefined;
  if (data === undefined || typeof data.session !== "string") return undefined;
  return { session: data.session, queuedSeq: typeof data.queuedSeq === "number" ? data.queuedSeq : 1 };
}

function strOf(o: unknown, k: string): string | undefined {
  if (o === null || typeof o !== "object") return undefined;
  const v = (o as Record<string, unknown>)[k];
  return typeof v === "string" ? v : undefined;
}

/**
 * Prompt text holding a secret's shape is refused, not scrubbed. The CLI needs the prompt as written,
 * so a scrubbed copy could only go to the log while the job record (kept for days, readable by
 * anything with queue access) still held the secret; refusing keeps it out of both, and the secret
 * has a proper way in: an env reference, resolved on the worker and scrubbed from all it writes.
 */
function refuseSecretShapedText(field: string, text: string): void {
  const shape = secretShapeIn(text);
  if (shape === undefined) return;
  throw new InvalidTurnError(
    field,
    `holds what looks like a secret (${shape}); job records and the event log must not hold secrets: pass it as options.env: { NAME: { fromEnv: "<worker env var>" } } and have the prompt refer to $NAME`,
  );
}

/** The template, then what the variables added to it, then the appended system prompt. */
function refuseSecretShapedPrompt(template: string, rendered: string, appendSystemPrompt: string | undefined): void {
  refuseSecretShapedText("prompt", template);
  if (rendered !== template) refuseSecretShapedText("variables", rendered);
  if (appendSystemPrompt !== undefined) refuseSecretShapedText("options.appendSystemPrompt", appendSystemPrompt);
}

/** A producer on this Redis: enqueues turns (validated, ordered per session, idempotent by key), cancels them and follows them to their end. */
export function createProducer(config: QueueConfig): Producer {
  const allowEnv = checkAllowEnv(config.allowEnv ?? []);
  const logPrefix = config.logPrefix ?? DEFAULT_PREFIX;
  const log = createEventLog({ redis: config.redis, prefix: logPrefix, ...(config.logger ? { logger: config.logger } : {}) });
  const queue = createTurnQueue(config);
  const queuePrefix = config.queuePrefix ?? DEFAULT_QUEUE_PREFIX;
  const order = new SessionOrder({ redis: config.redis, logPrefix, queue });
  const followers = new SessionFollowers(log);
  // Where this producer's own recent turns are, so waiting for them needs no look-up round trip.
  const ownTurns = new Map<string, { session: string; queuedSeq: number }>();
  const remember = (turn: string, where: { session: string; queuedSeq: number }): void => {
    ownTurns.delete(turn);
    ownTurns.set(turn, where);
    if (ownTurns.size > OWN_TURNS_KEPT) ownTurns.delete(ownTurns.keys().next().value!);
  };

  async function enqueueTurn(input: EnqueueInput): Promise<EnqueueResult> {
    const req = parseOrThrow(enqueueInputSchema, input);
    const prompt = renderPrompt(req.prompt, req.variables);
    const session = req.session ?? sessionId(req.idempotencyKey);
    const turn = turnId(session, req.idempotencyKey);
    const options = req.options ?? {};
    refuseSecretShapedPrompt(req.prompt, prompt, options.appendSystemPrompt);
    const refused = firstRefusedEnvName(Object.keys(options.env ?? {}), allowEnv);
    if (refused !== undefined) throw new InvalidTurnError(`options.env.${refused.name}`, refused.why);
    const traceparent = activeTraceparent();
    const created = await order.register(session, turn, req.onLostSession);
    const queued: TurnQueuedData = { prompt, cwd: req.cwd };
    if (options.model !== undefined) queued.model = options.model;
    if (traceparent !== undefined) queued.traceparent = traceparent;
    if (req.idempotencyKey !== undefined) queued.idempotencyKey = req.idempotencyKey;
    if (options.env !== undefined) {
      queued.env = Object.entries(options.env).map(([k, v]) => (typeof v === "string" ? k : `ref:${k}`));
    }
    if (req.onLostSession !== undefined) queued.onLostSession = req.onLostSession;
    // One batch under a writer id derived from the turn: a repeated enqueue comes back `duplicate`
    // with the original seq, so the log holds one turn.queued per turn.
    const res = await log.appendUnfenced(session, [{ turn, attempt: 0, kind: "turn.queued", data: queued }], {
      batchId: `${queuedWriter(turn)}:1`,
    });
    const job: TurnJob = {
      v: JOB_VERSION,
      session,
      turn,
      prompt,
      cwd: req.cwd,
      options,
      queuedSeq: res.lastSeq,
      enqueuedAt: new Date().toISOString(),
      ...(req.onLostSession !== undefined ? { onLostSession: req.onLostSession } : {}),
      ...(traceparent !== undefined ? { traceparent } : {}),
    };
    parseOrThrow(turnJobSchema, job);
    await config.redis.set(turnRecordKey(queuePrefix, turn), `${session}|${res.lastSeq}`, "EX", JOB_RETENTION.removeOnComplete.age);
    await queue.add("turn", job, { jobId: turn, attempts: 1, ...JOB_RETENTION });
    remember(turn, { session, queuedSeq: res.lastSeq });
    return { session, turn, jobId: turn, queuedSeq: res.lastSeq, created };
  }

  async function locate(turn: string, session: string | undefined): Promise<{ session: string; queuedSeq: number }> {
    const own = ownTurns.get(turn);
    if (own !== undefined && (session === undefined || own.session === session)) return own;
    if (session !== undefined) {
      const found = await sessionOfTurn(queue, turn, config.redis);
      return { session, queuedSeq: found?.session === session ? found.queuedSeq : 1 };
    }
    const found = await sessionOfTurn(queue, turn, config.redis);
    if (found === undefined) throw new UnknownTurnError(turn);
    return found;
  }

  async function cancelTurn(turn: string, options: { session?: string; reason?: string; by?: string } = {}): Promise<CancelResult> {
    const { session } = await locate(turn, options.session);
    const pending = await order.pending(session);
    if (!pending.includes(turn)) return { session, turn, outcome: "too_late" };
    // Flag first: a worker that picks the job from now on sees the flag and ends the turn itself.
    await order.requestCancel(session, turn);
    const job = await Job.fromId(queue, turn).catch(() => undefined);
    let removed = job === undefined;
    if (job !== undefined) {
      try {
        // Refused while a worker holds the job's lock: then that worker records the cancellation.
        await job.remove();
        removed = true;
      } catch {
        removed = false;
      }
    }
    if (!removed) return { session, turn, outcome: "requested" };
    const data: TurnCancelledData = { reason: options.reason ?? "cancelled before it ran", by: options.by ?? "producer" };
    await log.appendUnfenced(session, [{ turn, attempt: 0, kind: "turn.cancelled", data }], { batchId: `c-${turn}:1` });
    await order.wake(await order.drop(session, turn));
    return { session, turn, outcome: "cancelled" };
  }

  async function waitForTurn(turn: string, options: WaitOptions = {}): Promise<TurnResult> {
    const { session, queuedSeq } = await locate(turn, options.session);
    const ac = new AbortController();
    const onOuterAbort = (): void => ac.abort();
    options.signal?.addEventListener("abort", onOuterAbort, { once: true });
    let timedOut = false;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            ac.abort();
          }, options.timeoutMs);
    const resultText = new Map<number, string>();
    let result: TurnResult | undefined;
    const onEvent = (ev: Envelope): boolean => {
      options.onEvent?.(ev);
      if (ev.kind === "cli.line") {
        const raw = strOf(ev.data, "raw");
        if (raw !== undefined && raw.includes('"type":"result"')) {
          try {
            const line = JSON.parse(raw) as unknown;
            const text = strOf(line, "type") === "result" ? strOf(line, "result") : undefined;
            if (text !== undefined) resultText.set(ev.attempt, text);
          } catch {
            // not JSON after all: no result text
          }
        }
      }
      if (!isTerminalKind(ev.kind)) return false;
      const d = (ev.data ?? {}) as Record<string, unknown>;
      const attempt = typeof d["attempt"] === "number" ? d["attempt"] : ev.attempt;
      result = {
        session,
        turn,
        status: ev.kind.slice("turn.".length) as TurnStatus,
        event: ev,
        attempt,
        resultText: strOf(d, "resultText") ?? resultText.get(attempt),
        cliSessionId: strOf(d, "cliSessionId"),
        errorKind: strOf(d, "errorKind"),
      };
      return true;
    };
    try {
      await followers.follow(session, turn, queuedSeq, onEvent, ac.signal, options.onEvent !== undefined).catch((err: unknown) => {
        if (!ac.signal.aborted) throw err;
      });
      if (result !== undefined) return result;
      if (timedOut) throw new WaitTimeoutError(turn, options.timeoutMs!);
      throw options.signal?.reason instanceof Error ? options.signal.reason : new Error(`waiting for turn ${turn} was aborted`);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      options.signal?.removeEventListener("abort", onOuterAbort);
    }
  }

  return {
    enqueueTurn,
    cancelTurn,
    waitForTurn,
    queue,
    log,
    order,
    close: () => {
      followers.close();
      return closeTurnQueue(queue);
    },
  };
}

export { InvalidTurnError };
