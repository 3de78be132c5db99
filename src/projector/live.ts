// The live projector: discovers sessions (the log's index, rescanned periodically), follows each
// session that has work with a blocking read of its stream, and commits read models plus checkpoint
// atomically (session-projection.ts). Any number may run at once; each session's commits are
// compare-and-set, so racing projectors waste work at worst, never apply an event twice.
import { EventEmitter } from "node:events";
import {
  backoffDelayMs,
  errorFields,
  errorReporter,
  silentLogger,
  DEFAULT_PREFIX,
  type ErrorReporter,
  type Logger,
} from "../kernel/index.ts";
import { createEventLog, type EventLog, type RedisClient } from "../log/index.ts";
import { SessionProjection, type StepResult } from "./session-projection.ts";
import { PROJECTION_VERSION, projectionKeys, readModel, type ReadModel } from "./store.ts";
import type { ProjectionState, SessionSummary } from "./state.ts";

export interface ProjectorOptions {
  /** Where the log is read and the read models are written. */
  redis: RedisClient;
  /** Event log key prefix (default "ts:"); the read models live under it too. */
  prefix?: string;
  /** Projection version to build (default PROJECTION_VERSION); a newer one rebuilds into new keys. */
  version?: number;
  /** Where the projector logs (pino-compatible). */
  logger?: Logger;
  /** How often the session index is rescanned; default 2000 ms. */
  rescanMs?: number;
  /** One blocking read waits at most this long before re-checking; default 1000 ms. */
  blockMs?: number;
  /** Most events folded into one commit of a session's read models. */
  batchEvents?: number;
  /** Follow exactly these sessions instead of the index (tests, one-off rebuilds). */
  sessions?: readonly string[];
  /** stop() waits at most this long for steps in flight; default 5000 ms. */
  stopTimeoutMs?: number;
  /**
   * Called with a session's state once its read models have caught up with the log (after the last
   * commit of a run of them): where a copy elsewhere is kept current, such as the archive's summary
   * row. A failure is retried, with backoff, before the session is waited on again.
   */
  onCaughtUp?: (session: string, state: ProjectionState) => Promise<void>;
}

export interface ProjectorStats {
  following: number;
  commits: number;
  conflicts: number;
  errors: number;
  superseded: number;
}

export interface Projector {
  /** Stops following, lets steps in flight finish (bounded), closes its connections. */
  stop(): Promise<void>;
  /** Resolves once every known session's projection has caught up with its log. */
  waitIdle(timeoutMs?: number): Promise<void>;
  readModel(session: string): Promise<ReadModel | undefined>;
  readonly stats: Readonly<ProjectorStats>;
  readonly version: number;
  /**
   * Events in the log past this projector's checkpoints, summed over its sessions, as of the last rescan (the lag
   * metric).
   */
  readonly lag: number;
}

/** View statuses after which a session needs no follower until the index shows new activity. */
const TERMINAL_STATUSES = new Set(["finished", "failed", "cancelled"]);

/** Where a session stands: the log's last seq, our checkpoint, and the status of its read model. */
interface SessionStanding {
  session: string;
  logSeq: number;
  seq: number;
  status: string | null;
}

/** A sleep that can be cut short (stop() wakes followers that wait out a retry delay). */
class WakeableSleep {
  #wake: () => void = () => {};

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  wake(): void {
    this.#wake();
  }
}

class LiveProjector implements Projector {
  readonly version: number;
  readonly #options: ProjectorOptions;
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #logger: Logger;
  /** Errors of the followers' own connections, which repeat on every reconnect while Redis is away. */
  readonly #connectionErrors: ErrorReporter;
  readonly #log: EventLog;
  readonly #followers = new Map<string, { done: Promise<void>; sleep: WakeableSleep }>();
  readonly #superseded = new Set<string>();
  #lag = 0;
  /** `commit` and `idle` per session: what waitIdle waits on. */
  readonly #events = new EventEmitter();
  readonly #stats: ProjectorStats = { following: 0, commits: 0, conflicts: 0, errors: 0, superseded: 0 };
  /** The followers' blocking connections, disconnected by stop() to end their reads at once. */
  readonly #blockingConnections = new Set<RedisClient>();
  readonly #rescanTimer: NodeJS.Timeout;
  #stopping = false;
  #scanning: Promise<void> | undefined;

  constructor(options: ProjectorOptions) {
    this.#options = options;
    this.#redis = options.redis;
    this.#prefix = options.prefix ?? DEFAULT_PREFIX;
    this.version = options.version ?? PROJECTION_VERSION;
    if (!Number.isSafeInteger(this.version) || this.version < 1)
      throw new Error("projection version must be a positive integer");
    this.#logger = options.logger ?? silentLogger;
    this.#connectionErrors = errorReporter(this.#logger);
    this.#log = createEventLog({ redis: this.#redis, prefix: this.#prefix, logger: this.#logger });
    this.#events.setMaxListeners(0);
    this.#rescanTimer = setInterval(() => void this.#rescan(), options.rescanMs ?? 2000);
    this.#rescanTimer.unref();
    void this.#rescan();
  }

  get lag(): number {
    return this.#lag;
  }

  get stats(): ProjectorStats {
    return { ...this.#stats };
  }

  readModel(session: string): Promise<ReadModel | undefined> {
    return readModel(this.#redis, session, { prefix: this.#prefix });
  }

  async waitIdle(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.#stopping) throw new Error("projector is stopping");
      await this.#rescan();
      const lagging = (await this.#survey()).filter((s) => !this.#superseded.has(s.session) && s.logSeq > s.seq);
      if (lagging.length === 0) return;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`projector did not catch up within ${timeoutMs} ms (${lagging.length} sessions behind)`);
      await this.#nextCommitOrIdle(Math.min(left, 250));
    }
  }

  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    clearInterval(this.#rescanTimer);
    for (const follower of this.#followers.values()) follower.sleep.wake();
    for (const connection of this.#blockingConnections) connection.disconnect();
    const all = Promise.all([...this.#followers.values()].map((f) => f.done));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">(
      (resolve) => (timer = setTimeout(() => resolve("timeout"), this.#options.stopTimeoutMs ?? 5000)),
    );
    const ending = await Promise.race([all.then(() => "done" as const), timedOut]);
    clearTimeout(timer);
    if (ending === "timeout")
      this.#logger.warn(
        { followers: this.#followers.size },
        "projector stop timed out; steps in flight were left to their commit script",
      );
    if (this.#scanning) await this.#scanning.catch(() => {});
  }

  /** Resolves on the next commit or idle of any session, or after `ms`. */
  #nextCommitOrIdle(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#events.off("commit", done);
        this.#events.off("idle", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#events.on("commit", done);
      this.#events.on("idle", done);
    });
  }

  /** Sessions to consider and where each stands. */
  async #survey(): Promise<SessionStanding[]> {
    const ids = this.#options.sessions !== undefined ? [...this.#options.sessions] : await this.#log.sessions();
    return Promise.all(
      ids.map(async (session) => {
        const keys = projectionKeys(this.#prefix, session, this.version);
        const [logSeq, [seq, summary]] = await Promise.all([
          this.#redis.hget(keys.logMeta, "seq"),
          this.#redis.hmget(keys.model, "seq", "summary"),
        ]);
        const status =
          summary === null || summary === undefined ? null : (JSON.parse(summary) as SessionSummary).status;
        return { session, logSeq: Number(logSeq ?? 0), seq: Number(seq ?? 0), status };
      }),
    );
  }

  /** Starts a follower for each session that has work: events past our checkpoint, or a turn still open. */
  async #rescan(): Promise<void> {
    if (this.#stopping) return;
    this.#scanning ??= (async () => {
      try {
        const survey = (await this.#survey()).filter((s) => !this.#superseded.has(s.session));
        this.#lag = survey.reduce((sum, s) => sum + Math.max(0, s.logSeq - s.seq), 0);
        for (const surveyed of survey) {
          if (this.#followers.has(surveyed.session)) continue;
          if (
            surveyed.logSeq > surveyed.seq ||
            (surveyed.logSeq > 0 && surveyed.status !== null && !TERMINAL_STATUSES.has(surveyed.status))
          )
            this.#follow(surveyed.session);
        }
      } catch (err) {
        this.#stats.errors++;
        this.#logger.warn({ err: errorFields(err) }, "session rescan failed");
      } finally {
        this.#scanning = undefined;
      }
    })();
    return this.#scanning;
  }

  #follow(session: string): void {
    if (this.#followers.has(session) || this.#stopping) return;
    const sleep = new WakeableSleep();
    const done = this.#runFollower(session, sleep).catch((err: unknown) => {
      this.#stats.errors++;
      this.#logger.error({ session, err: errorFields(err) }, "session follower stopped");
    });
    this.#followers.set(session, { done, sleep });
    this.#stats.following = this.#followers.size;
  }

  /** Steps the session's projection until it is superseded, finished, or the projector stops. */
  async #runFollower(session: string, sleep: WakeableSleep): Promise<void> {
    const { batchEvents } = this.#options;
    const proj = new SessionProjection({ log: this.#log, session, version: this.version, batchEvents });
    const conn = this.#redis.duplicate();
    // Without a listener ioredis prints each connection error, stack and all, to the console.
    conn.on("error", (err: Error) => this.#connectionErrors("redis connection error", err, { connection: "follower" }));
    this.#blockingConnections.add(conn);
    let failures = 0;
    // Owed from the start (a previous run may have stopped between its commit and the hand-off) and
    // again after each commit; cleared once onCaughtUp has taken the state.
    let owed = true;
    let handOffFailures = 0;
    try {
      while (!this.#stopping) {
        let result: StepResult;
        try {
          result = await proj.step();
          failures = 0;
        } catch (err) {
          failures++;
          await this.#afterFailedStep(session, proj, err, failures, sleep);
          continue;
        }
        if (result === "superseded") return this.#supersede(session);
        if (result !== "idle") {
          this.#countCommit(session, result);
          owed ||= result === "progress";
          continue;
        }
        if (owed && !(await this.#caughtUp(session, proj, ++handOffFailures, sleep))) continue;
        owed = false;
        handOffFailures = 0;
        this.#events.emit("idle", session);
        if (isFinished(proj.state)) return;
        if (!(await this.#waitForEvents(conn, session, proj.checkpoint))) return;
      }
    } finally {
      this.#blockingConnections.delete(conn);
      conn.disconnect();
      this.#followers.delete(session);
      this.#stats.following = this.#followers.size;
    }
  }

  /** Backs off (growing with each failure in a row), then reloads the state the step started from. */
  async #afterFailedStep(
    session: string,
    proj: SessionProjection,
    err: unknown,
    failures: number,
    sleep: WakeableSleep,
  ): Promise<void> {
    this.#stats.errors++;
    this.#logger.warn({ session, err: errorFields(err) }, "projection step failed; retrying");
    await sleep.sleep(backoffDelayMs(failures + 1, { baseMs: 50, maxMs: 2000 }));
    await proj.load().catch(() => {});
  }

  /** Hands the caught-up state to onCaughtUp; false (after logging and a backoff) when that failed. */
  async #caughtUp(session: string, proj: SessionProjection, failures: number, sleep: WakeableSleep): Promise<boolean> {
    const onCaughtUp = this.#options.onCaughtUp;
    if (onCaughtUp === undefined || proj.state === undefined) return true;
    try {
      await onCaughtUp(session, proj.state);
      return true;
    } catch (err) {
      this.#stats.errors++;
      this.#logger.warn({ session, err: errorFields(err) }, "could not pass on a caught-up session; retrying");
      await sleep.sleep(backoffDelayMs(failures, { baseMs: 50, maxMs: 2000 }));
      return false;
    }
  }

  #countCommit(session: string, result: "progress" | "conflict"): void {
    if (result === "progress") this.#stats.commits++;
    else this.#stats.conflicts++;
    this.#events.emit("commit", session);
  }

  #supersede(session: string): void {
    this.#superseded.add(session);
    this.#stats.superseded++;
    this.#logger.info({ session, version: this.version }, "a newer projection version took over this session");
  }

  /**
   * Blocks until the session has an event past `checkpoint` (or blockMs passes); false once stopping ended the read.
   */
  async #waitForEvents(conn: RedisClient, session: string, checkpoint: number): Promise<boolean> {
    try {
      await conn.xread(
        "COUNT",
        1,
        "BLOCK",
        this.#options.blockMs ?? 1000,
        "STREAMS",
        this.#log.keys(session).events,
        `0-${checkpoint}`,
      );
      return true;
    } catch (err) {
      if (this.#stopping) return false;
      throw err;
    }
  }
}

/** Caught up, ended, and no decision waiting: nothing will happen until the index shows new activity. */
function isFinished(state: SessionProjection["state"]): boolean {
  return state !== undefined && TERMINAL_STATUSES.has(state.view.status) && state.decisions.pending.length === 0;
}

/**
 * Starts the live projector: follows the sessions in the log's index and keeps their read models in Redis, checkpointed
 * in the same step.
 */
export function startProjector(options: ProjectorOptions): Projector {
  return new LiveProjector(options);
}
