// The producer: enqueue, cancel and follow turns. One BullMQ job per turn (jobId = turn id, so the
// same idempotency key enqueues once); the session's pending list fixes the order; `turn.queued` in
// the session log records the rendered prompt and the producer's trace context.
import { context, propagation, trace } from "@opentelemetry/api";
import { Job, Queue } from "bullmq";
import { LRUCache } from "lru-cache";
import {
  AckedSeqs,
  createEventLog,
  DEFAULT_PREFIX,
  parseDurability,
  type Envelope,
  type EventLog,
  type Logger,
  type RedisClient,
} from "../log/index.ts";
import { bullConnection, reportBullErrors } from "./connection.ts";
import { InvalidTurnError, SessionRemovedWhileEnqueuingError, UnknownTurnError, WaitTimeoutError } from "./errors.ts";
import { dataOf, isTerminalKind, type TurnCancelledData, type TurnQueuedData } from "../events/index.ts";
import { errorReporter, silentLogger, stringField } from "../kernel/index.ts";
import { isKnown, parseLine } from "../protocol/index.ts";
import { queuedWriter, sessionId, turnId } from "./ids.ts";
import { assertQueuePrefix, DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX } from "./keys.ts";
import { withQueueEnvDefaults } from "./env-config.ts";
import { liveWorkerCount, noWorkerWarning } from "./live-workers.ts";
import { SessionFollowers } from "./follow.ts";
import { SessionOrder, type RegisterSettings, type Registered } from "./order.ts";
import { fairSharePriority } from "../tenants/index.ts";
import { firstRefusedEnvName, jobEnvPolicyFrom, type JobEnvPolicy } from "./env-policy.ts";

// Compiled once: the allow-list of a producer given no env options.
const DEFAULT_ENV_POLICY = jobEnvPolicyFrom({});
import {
  cwdProblem,
  enqueueInputSchema,
  JOB_VERSION,
  parseOrThrow,
  renderPrompt,
  turnJobSchema,
  type EnqueueInput,
  type EnqueueRequest,
  type TurnJob,
  type TurnOptions,
} from "./schema.ts";
import { secretShapeIn } from "../telemetry/index.ts";

/**
 * Where the producer finds the fleet, and how it checks turns. Each of `logPrefix`, `queuePrefix`,
 * `queueName` and `durability` left out is taken from the variable the workers and the commands read
 * (TURNSTREAM_PREFIX, TURNSTREAM_QUEUE_PREFIX, TURNSTREAM_QUEUE_NAME, TURNSTREAM_DURABILITY), else its default.
 */
export interface QueueConfig {
  /** Client for the log and the ordering scripts (BullMQ gets a duplicate that retries forever). */
  redis: RedisClient;
  /** Event log key prefix (default TURNSTREAM_PREFIX, else "ts:"). */
  logPrefix?: string;
  /** BullMQ prefix: one hash tag (default TURNSTREAM_QUEUE_PREFIX, else "{turnstream}"). */
  queuePrefix?: string;
  /** The queue's name (default TURNSTREAM_QUEUE_NAME, else "turns"). */
  queueName?: string;
  /**
   * Where the producer reports: its queue's errors, and a warning (once) when it waits for a turn and
   * no worker listens on its queue. Default silent.
   */
  logger?: Logger;
  /**
   * The env names (and `PREFIX*` patterns) a turn's overlay may set; default DEFAULT_JOB_ENV_ALLOW.
   * Give it the workers' TURNSTREAM_JOB_ENV_ALLOW: they check again with their own.
   */
  jobEnvAllow?: readonly string[];
  /** Names added to `jobEnvAllow` or to its default (the workers' TURNSTREAM_ALLOW_ENV). */
  allowEnv?: readonly string[];
  /**
   * Refuse at enqueue a cwd that does not exist or is not a directory on this host: for a producer
   * that shares the workers' filesystem. Off by default, since a producer usually runs elsewhere;
   * workers check every turn's cwd before they start its CLI either way.
   */
  checkCwd?: boolean | undefined;
  /** When the producer's appends count as done (default TURNSTREAM_DURABILITY, else memory): replicas:N or fsync. */
  durability?: string | undefined;
  /**
   * Brings a session retention removed from Redis back before a turn is enqueued to it (the archive
   * supplies it: `archiveRestorer`), so the turn resumes the session's history instead of starting a
   * new one. Called for every enqueue; it returns at once when Redis holds the session.
   */
  restore?: SessionRestorer | undefined;
}

/**
 * What a restore found: the session in Redis (`present`), written back from the archive (`restored`),
 * or in neither (`not-archived`: the turn starts a new session).
 */
export type SessionRestorer = (session: string) => Promise<"present" | "restored" | "not-archived">;

/** How often an enqueue restores again after retention removed its session right after a restore. */
const RESTORE_TRIES = 5;

export interface EnqueueResult {
  session: string;
  turn: string;
  jobId: string;
  /** seq of the turn's turn.queued event. */
  queuedSeq: number;
  /** False when the idempotency key had already enqueued this turn. */
  created: boolean;
  /** The turn's tenant: the one it named, else its session's; undefined when the session has none. */
  tenant?: string | undefined;
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
  /** A failed turn's error message (turn.failed, scrubbed by the worker). */
  error: string | undefined;
}

export interface WaitOptions {
  /** Needed only when the turn's job record is gone (retention). */
  session?: string | undefined;
  /** Every event of this turn, in log order, as it is appended. */
  onEvent?: ((event: Envelope) => void) | undefined;
  /** Aborting it stops the wait (rejects). */
  signal?: AbortSignal | undefined;
  /** Gives up with a WaitTimeoutError after this long (the turn goes on). */
  timeoutMs?: number | undefined;
}

export interface CancelOptions {
  /** Needed only when the turn's job record is gone (retention). */
  session?: string | undefined;
  /** Recorded in turn.cancelled; default "cancelled before it ran". */
  reason?: string | undefined;
  /** Who cancels, recorded in turn.cancelled; default "producer". */
  by?: string | undefined;
}

export interface CancelResult {
  session: string;
  turn: string;
  /**
   * cancelled: it will not run (recorded now); requested: it is running, its worker ends it; too_late: it already
   * ended.
   */
  outcome: "cancelled" | "requested" | "too_late";
}

export interface Producer {
  enqueueTurn(input: EnqueueInput): Promise<EnqueueResult>;
  cancelTurn(turn: string, options?: CancelOptions): Promise<CancelResult>;
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

/** The turn queue on `config.redis`: its prefix and name as given, else as the environment says (QueueConfig). */
export function createTurnQueue(config: QueueConfig): Queue {
  const { queuePrefix, queueName } = withQueueEnvDefaults({
    queuePrefix: config.queuePrefix,
    queueName: config.queueName,
  });
  const prefix = queuePrefix ?? DEFAULT_QUEUE_PREFIX;
  assertQueuePrefix(prefix);
  const connection = bullConnection(config.redis);
  const queue = new Queue(queueName ?? DEFAULT_QUEUE_NAME, { connection: connection as never, prefix });
  reportBullErrors(queue, connection, errorReporter(config.logger ?? silentLogger), "queue error");
  return queue;
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

export async function sessionOfTurn(
  queue: Queue,
  turn: string,
  redis?: RedisClient,
): Promise<{ session: string; queuedSeq: number } | undefined> {
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

/** Where a turn's events are: its session, and the seq of its turn.queued (where following starts). */
interface TurnPlace {
  session: string;
  queuedSeq: number;
}

/** The latest turns this producer enqueued, so waiting for one of them needs no look-up round trip. */
class RecentTurns {
  readonly #places = new LRUCache<string, TurnPlace>({ max: OWN_TURNS_KEPT });

  get(turn: string): TurnPlace | undefined {
    return this.#places.peek(turn);
  }

  remember(turn: string, place: TurnPlace): void {
    this.#places.set(turn, place);
  }
}

/** An enqueue request that passed every check, with its ids, its options and its rendered prompt. */
export interface CheckedEnqueue {
  req: EnqueueRequest;
  prompt: string;
  session: string;
  turn: string;
  options: TurnOptions;
  /** The turn's tenant: the one it names, else its session's (known once registered). */
  tenant?: string | undefined;
}

function registerSettings(checked: CheckedEnqueue, expectSession: boolean): RegisterSettings {
  return {
    onLostSession: checked.req.onLostSession,
    warm: checked.options.warm,
    expectSession,
    tenant: checked.req.tenant,
  };
}

/** Validates the request, renders its prompt and refuses secrets and env names the fleet does not allow. */
/**
 * Every check an enqueue makes before it writes anything: the schema, the template's variables,
 * secret-shaped text and refused env names (InvalidTurnError naming the field). `turnstream batch`
 * runs it over a whole file before it enqueues any turn.
 */
export function checkEnqueue(input: EnqueueInput, envPolicy: JobEnvPolicy = DEFAULT_ENV_POLICY): CheckedEnqueue {
  const req = parseOrThrow(enqueueInputSchema, input);
  const prompt = renderPrompt(req.prompt, req.variables);
  const session = req.session ?? sessionId(req.idempotencyKey);
  const turn = turnId(session, req.idempotencyKey);
  const options = req.options ?? {};
  refuseSecretShapedPrompt(req.prompt, prompt, options.appendSystemPrompt);
  for (const [name, value] of Object.entries(req.labels ?? {})) refuseSecretShapedText(`labels.${name}`, value);
  if (req.tenant !== undefined) refuseSecretShapedText("tenant", req.tenant);
  const refused = firstRefusedEnvName(Object.keys(options.env ?? {}), envPolicy);
  if (refused !== undefined) throw new InvalidTurnError(`options.env.${refused.name}`, refused.why);
  return { req, prompt, session, turn, options, tenant: req.tenant };
}

/** Refuses a cwd that is not a directory on this host (QueueConfig.checkCwd), naming it. */
function refuseBadCwd(cwd: string): void {
  const problem = cwdProblem(cwd);
  if (problem === undefined) return;
  throw new InvalidTurnError(
    "cwd",
    `${JSON.stringify(cwd)} ${problem} on this host; enqueue the turn with an existing directory`,
  );
}

/** The turn.queued event's data: the rendered prompt, and of the env overlay only its names. */
function queuedEventData(checked: CheckedEnqueue, traceparent: string | undefined): TurnQueuedData {
  const { req, prompt, options } = checked;
  const queued: TurnQueuedData = { prompt, cwd: req.cwd };
  if (options.model !== undefined) queued.model = options.model;
  if (traceparent !== undefined) queued.traceparent = traceparent;
  if (req.idempotencyKey !== undefined) queued.idempotencyKey = req.idempotencyKey;
  if (options.env !== undefined)
    queued.env = Object.entries(options.env).map(([k, v]) => (typeof v === "string" ? k : `ref:${k}`));
  if (req.onLostSession !== undefined) queued.onLostSession = req.onLostSession;
  if (req.labels !== undefined) queued.labels = req.labels;
  if (checked.tenant !== undefined) queued.tenant = checked.tenant;
  return queued;
}

function turnJob(
  { req, prompt, session, turn, options, tenant }: CheckedEnqueue,
  queuedSeq: number,
  traceparent: string | undefined,
): TurnJob {
  const job: TurnJob = {
    v: JOB_VERSION,
    session,
    turn,
    prompt,
    cwd: req.cwd,
    options,
    queuedSeq,
    enqueuedAt: new Date().toISOString(),
  };
  if (req.onLostSession !== undefined) job.onLostSession = req.onLostSession;
  if (tenant !== undefined) job.tenant = tenant;
  if (traceparent !== undefined) job.traceparent = traceparent;
  parseOrThrow(turnJobSchema, job);
  return job;
}

/** The `result` text of a CLI stdout line that is a result line. */
function resultLineText(raw: string): string | undefined {
  const line = parseLine(raw);
  return isKnown(line, "result") ? stringField(line.line, "result") : undefined;
}

/** Reads a turn's events as they come and builds its result from the terminal one. */
class TurnResultReader {
  result: TurnResult | undefined;
  readonly #place: { session: string; turn: string };
  /** Each attempt's result text from its last result line, for a terminal event that does not carry it. */
  readonly #resultTexts = new Map<number, string>();

  constructor(session: string, turn: string) {
    this.#place = { session, turn };
  }

  /** True once the event ended the turn. */
  read(ev: Envelope): boolean {
    if (ev.kind === "cli.line") {
      const raw = dataOf("cli.line", ev.data)?.raw;
      const text = raw === undefined ? undefined : resultLineText(raw);
      if (text !== undefined) this.#resultTexts.set(ev.attempt, text);
    }
    if (!isTerminalKind(ev.kind)) return false;
    this.result = this.#terminalResult(ev);
    return true;
  }

  #terminalResult(ev: Envelope): TurnResult {
    const finished = ev.kind === "turn.finished" ? dataOf("turn.finished", ev.data) : undefined;
    const failed = ev.kind === "turn.failed" ? dataOf("turn.failed", ev.data) : undefined;
    const cancelled = ev.kind === "turn.cancelled" ? dataOf("turn.cancelled", ev.data) : undefined;
    const attempt = finished?.attempt ?? failed?.attempt ?? cancelled?.attempt ?? ev.attempt;
    return {
      ...this.#place,
      status: ev.kind.slice("turn.".length) as TurnStatus,
      event: ev,
      attempt,
      resultText: finished?.resultText ?? this.#resultTexts.get(attempt),
      cliSessionId: finished?.cliSessionId,
      errorKind: failed?.errorKind,
      error: failed?.error.message,
    };
  }
}

/** Ends a wait when the caller's signal aborts or its timeout passes, whichever comes first. */
class WaitDeadline {
  readonly #controller = new AbortController();
  readonly #outer: AbortSignal | undefined;
  readonly #onOuterAbort = (): void => this.#controller.abort();
  readonly #timer: NodeJS.Timeout | undefined;
  timedOut = false;

  constructor(outer: AbortSignal | undefined, timeoutMs: number | undefined) {
    this.#outer = outer;
    outer?.addEventListener("abort", this.#onOuterAbort, { once: true });
    if (timeoutMs === undefined) return;
    this.#timer = setTimeout(() => {
      this.timedOut = true;
      this.#controller.abort();
    }, timeoutMs);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#outer?.removeEventListener("abort", this.#onOuterAbort);
  }
}

class TurnProducer implements Producer {
  readonly queue: Queue;
  readonly log: EventLog;
  readonly order: SessionOrder;
  readonly #redis: RedisClient;
  readonly #queuePrefix: string;
  readonly #envPolicy: JobEnvPolicy;
  readonly #checkCwd: boolean;
  readonly #restore: SessionRestorer | undefined;
  readonly #followers: SessionFollowers;
  readonly #recent = new RecentTurns();
  /** The seq this producer was last acknowledged per session (its turn.queued, its cancels). */
  readonly #acked = new AckedSeqs();
  readonly #logger: Logger | undefined;
  /** Whether a wait has looked for the queue's workers yet: the warning is said once per producer. */
  #workersLookedFor = false;

  constructor(config: QueueConfig) {
    this.#logger = config.logger;
    this.#envPolicy = jobEnvPolicyFrom(config);
    this.#checkCwd = config.checkCwd === true;
    this.#restore = config.restore;
    const logPrefix = config.logPrefix ?? DEFAULT_PREFIX;
    this.#redis = config.redis;
    this.log = createEventLog({
      redis: config.redis,
      prefix: logPrefix,
      logger: config.logger,
      durability: parseDurability(config.durability, "durability (TURNSTREAM_DURABILITY)"),
    });
    this.queue = createTurnQueue(config);
    this.#queuePrefix = config.queuePrefix ?? DEFAULT_QUEUE_PREFIX;
    this.order = new SessionOrder({ redis: config.redis, logPrefix, queue: this.queue });
    this.#followers = new SessionFollowers(this.log);
  }

  async enqueueTurn(input: EnqueueInput): Promise<EnqueueResult> {
    const checked = checkEnqueue(input, this.#envPolicy);
    if (this.#checkCwd) refuseBadCwd(checked.req.cwd);
    const { session, turn } = checked;
    const traceparent = activeTraceparent();
    const { created, warm, tenant } = await this.#register(checked);
    // A turn that names no tenant is its session's tenant's.
    if (tenant !== undefined) checked.tenant = tenant;
    // The session's warm mode travels in the job, so a worker needs no read of its own to know it.
    if (warm && checked.options.warm === undefined) checked.options = { ...checked.options, warm: true };
    // One batch under a writer id derived from the turn: a repeated enqueue comes back `duplicate`
    // with the original seq, so the log holds one turn.queued per turn.
    const queued = { turn, attempt: 0, kind: "turn.queued", data: queuedEventData(checked, traceparent) };
    // It claims the seq this producer last appended to the session at: a log that lost it is refused.
    const appended = await this.log.appendUnfenced(session, [queued], {
      batchId: `${queuedWriter(turn)}:1`,
      ackedSeq: this.#acked.get(session),
    });
    // Refused on a log that lost what it had acknowledged: the turn is taken off the session's order too.
    if (appended.outcome === "rolled_back") await this.order.wake(await this.order.drop(session, turn));
    const { lastSeq } = this.#acked.settle(session, appended);
    const job = turnJob(checked, lastSeq, traceparent);
    await this.#redis.set(
      turnRecordKey(this.#queuePrefix, turn),
      `${session}|${lastSeq}`,
      "EX",
      JOB_RETENTION.removeOnComplete.age,
    );
    const priority = await fairSharePriority(this.#redis, this.queue, this.#queuePrefix, checked.tenant);
    await this.queue.add("turn", job, { jobId: turn, attempts: 1, priority, ...JOB_RETENTION });
    this.#recent.remember(turn, { session, queuedSeq: lastSeq });
    return { session, turn, jobId: turn, queuedSeq: lastSeq, created, tenant: checked.tenant };
  }

  async cancelTurn(turn: string, options: CancelOptions = {}): Promise<CancelResult> {
    const { session } = await this.#locate(turn, options.session);
    const pending = await this.order.pending(session);
    if (!pending.includes(turn)) return { session, turn, outcome: "too_late" };
    // Flag first: a worker that picks the job from now on sees the flag and ends the turn itself.
    await this.order.requestCancel(session, turn);
    if (!(await this.#removeJob(turn))) return { session, turn, outcome: "requested" };
    const data: TurnCancelledData = {
      reason: options.reason ?? "cancelled before it ran",
      by: options.by ?? "producer",
    };
    const cancelled = await this.log.appendUnfenced(session, [{ turn, attempt: 0, kind: "turn.cancelled", data }], {
      batchId: `c-${turn}:1`,
      ackedSeq: this.#acked.get(session),
    });
    this.#acked.settle(session, cancelled);
    await this.order.wake(await this.order.drop(session, turn));
    return { session, turn, outcome: "cancelled" };
  }

  async waitForTurn(turn: string, options: WaitOptions = {}): Promise<TurnResult> {
    const { session, queuedSeq } = await this.#locate(turn, options.session);
    this.#lookForWorkersOnce();
    const deadline = new WaitDeadline(options.signal, options.timeoutMs);
    const reader = new TurnResultReader(session, turn);
    const onEvent = (ev: Envelope): boolean => {
      options.onEvent?.(ev);
      return reader.read(ev);
    };
    try {
      await this.#followers
        .follow(session, turn, queuedSeq, onEvent, deadline.signal, options.onEvent !== undefined)
        .catch((err: unknown) => {
          if (!deadline.signal.aborted) throw err;
        });
      if (reader.result !== undefined) return reader.result;
      if (deadline.timedOut) throw new WaitTimeoutError(turn, options.timeoutMs!);
      throw options.signal?.reason instanceof Error
        ? options.signal.reason
        : new Error(`waiting for turn ${turn} was aborted`);
    } finally {
      deadline.dispose();
    }
  }

  /**
   * Registers the turn in its session's order, the session first restored from the archive when one
   * is configured. Retention may remove the session between the restore and the register: the
   * register is then told the session must exist, refuses, and the restore runs again (now from the
   * archive), so the turn never starts a fresh log at seq 1 while the history sits in the archive.
   */
  /** The registration's answer, or the refusal of a turn naming another tenant than its session's. */
  #registered(checked: CheckedEnqueue, registered: Registered): Registered {
    if (!registered.tenantConflict) return registered;
    const named = checked.req.tenant ?? "";
    const owner = registered.tenant === undefined ? "no tenant" : `tenant ${registered.tenant}`;
    throw new InvalidTurnError(
      "tenant",
      `session ${checked.session} belongs to ${owner}, not ${named}; a session's first turn names its tenant for good`,
    );
  }

  async #register(checked: CheckedEnqueue): Promise<Registered> {
    const { session, turn } = checked;
    if (this.#restore === undefined)
      return this.#registered(checked, await this.order.register(session, turn, registerSettings(checked, false)));
    for (let tries = 1; tries <= RESTORE_TRIES; tries++) {
      const found = await this.#restore(session);
      const expectSession = found !== "not-archived";
      const registered = await this.order.register(session, turn, registerSettings(checked, expectSession));
      if (!registered.gone) return this.#registered(checked, registered);
    }
    throw new SessionRemovedWhileEnqueuingError(session, RESTORE_TRIES);
  }

  /**
   * Warns through the logger, once, when no worker listens on the queue: a turn nobody serves waits
   * in silence. Beside the wait, never before it; skipped with no logger to say it to.
   */
  #lookForWorkersOnce(): void {
    const logger = this.#logger;
    if (this.#workersLookedFor || logger === undefined || logger === silentLogger) return;
    this.#workersLookedFor = true;
    void liveWorkerCount(this.queue).then((workers) => {
      if (workers === 0) logger.warn({ queue: this.queue.name }, noWorkerWarning(this.queue.name));
    });
  }

  close(): Promise<void> {
    this.#followers.close();
    return closeTurnQueue(this.queue);
  }

  /** Removes the turn's job unless a worker holds it; true when no job is left (removed, or there was none). */
  async #removeJob(turn: string): Promise<boolean> {
    const job = await Job.fromId(this.queue, turn).catch(() => undefined);
    if (job === undefined) return true;
    try {
      // Refused while a worker holds the job's lock: then that worker records the cancellation.
      await job.remove();
      return true;
    } catch {
      return false;
    }
  }

  async #locate(turn: string, session: string | undefined): Promise<TurnPlace> {
    const own = this.#recent.get(turn);
    if (own !== undefined && (session === undefined || own.session === session)) return own;
    const found = await sessionOfTurn(this.queue, turn, this.#redis);
    if (session !== undefined) return { session, queuedSeq: found?.session === session ? found.queuedSeq : 1 };
    if (found === undefined) throw new UnknownTurnError(turn);
    return found;
  }
}

/**
 * A producer on this Redis: enqueues turns (validated, ordered per session, idempotent by key), cancels them and
 * follows them to their end.
 */
export function createProducer(config: QueueConfig): Producer {
  const producer = new TurnProducer(withQueueEnvDefaults(config));
  // Plain functions, so a caller may pass producer.waitForTurn (etc.) around without binding it.
  return {
    enqueueTurn: (input) => producer.enqueueTurn(input),
    cancelTurn: (turn, options) => producer.cancelTurn(turn, options),
    waitForTurn: (turn, options) => producer.waitForTurn(turn, options),
    queue: producer.queue,
    log: producer.log,
    order: producer.order,
    close: () => producer.close(),
  };
}

export { InvalidTurnError };
