// The live projector: discovers sessions (the log's index, rescanned periodically), follows each
// session that has work with a blocking read of its stream, and commits read models plus checkpoint
// atomically (session-projection.ts). Any number may run at once; each session's commits are
// compare-and-set, so racing projectors waste work at worst, never apply an event twice.
import { EventEmitter } from "node:events";
import { silentLogger, DEFAULT_PREFIX, type Logger } from "../kernel/index.ts";
import { createEventLog, type EventLog, type RedisClient } from "../log/index.ts";
import { SessionProjection, type SessionProjectionOptions } from "./session-projection.ts";
import { PROJECTION_VERSION, projectionKeys, readModel, type ReadModel } from "./store.ts";
import type { SessionSummary } from "./state.ts";

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
  /** Failures to inject between steps (tests of crash safety). */
  faults?: SessionProjectionOptions["faults"];
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
}

const TERMINAL = new Set(["finished", "failed", "cancelled"]);

/** Starts the live projector: follows the sessions in the log's index and keeps their read models in Redis, checkpointed in the same step. */
export function startProjector(options: ProjectorOptions): Projector {
  const redis = options.redis;
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const version = options.version ?? PROJECTION_VERSION;
  if (!Number.isSafeInteger(version) || version < 1) throw new Error("projection version must be a positive integer");
  const logger = options.logger ?? silentLogger;
  const rescanMs = options.rescanMs ?? 2000;
  const blockMs = options.blockMs ?? 1000;
  const stopTimeoutMs = options.stopTimeoutMs ?? 5000;
  const log: EventLog = createEventLog({ redis, prefix, logger });
  const followers = new Map<string, { done: Promise<void>; wake: () => void }>();
  const superseded = new Set<string>();
  const events = new EventEmitter();
  events.setMaxListeners(0);
  const stats: ProjectorStats = { following: 0, commits: 0, conflicts: 0, errors: 0, superseded: 0 };
  const waiters = new Set<ReturnType<typeof redis.duplicate>>();
  let stopping = false;
  let scanning: Promise<void> | undefined;

  function follow(session: string): void {
    if (followers.has(session) || stopping) return;
    let wake = (): void => {};
    const done = (async () => {
      const proj = new SessionProjection({ log, session, version, batchEvents: options.batchEvents, faults: options.faults });
      const conn = redis.duplicate();
      waiters.add(conn);
      let failures = 0;
      try {
        while (!stopping) {
          let r;
          try {
            r = await proj.step();
            failures = 0;
          } catch (err) {
            stats.errors++;
            failures++;
            logger.warn({ session, err: { name: (err as Error)?.name, message: (err as Error)?.message } }, "projection step failed; retrying");
            await pause(Math.min(2000, 50 * 2 ** Math.min(failures, 6)), (w) => (wake = w));
            await proj.load().catch(() => {});
            continue;
          }
          if (r === "progress") {
            stats.commits++;
            events.emit("commit", session);
            continue;
          }
          if (r === "conflict") {
            stats.conflicts++;
            events.emit("commit", session);
            continue;
          }
          if (r === "superseded") {
            superseded.add(session);
            stats.superseded++;
            logger.info({ session, version }, "a newer projection version took over this session");
            return;
          }
          // idle: caught up. A finished session is left until the index shows new activity.
          events.emit("idle", session);
          const st = proj.state;
          if (st !== undefined && TERMINAL.has(st.view.status) && st.decisions.pending.length === 0) return;
          try {
            await conn.xread("COUNT", 1, "BLOCK", blockMs, "STREAMS", log.keys(session).events, `0-${proj.checkpoint}`);
          } catch (err) {
            if (stopping) return;
            throw err;
          }
        }
      } finally {
        waiters.delete(conn);
        conn.disconnect();
        followers.delete(session);
        stats.following = followers.size;
      }
    })().catch((err: unknown) => {
      stats.errors++;
      logger.error({ session, err: { name: (err as Error)?.name, message: (err as Error)?.message } }, "session follower stopped");
    });
    followers.set(session, { done, wake: () => wake() });
    stats.following = followers.size;
  }

  function pause(ms: number, onWake: (w: () => void) => void): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      onWake(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /** Sessions to consider and, per session, the log's last seq and our checkpoint and status. */
  async function survey(): Promise<{ session: string; logSeq: number; seq: number; status: string | null }[]> {
    const ids = options.sessions !== undefined ? [...options.sessions] : await log.sessions();
    return Promise.all(
      ids.map(async (session) => {
        const k = projectionKeys(prefix, session, version);
        const [logSeq, [seq, summary]] = await Promise.all([redis.hget(k.logMeta, "seq"), redis.hmget(k.model, "seq", "summary")]);
        const status = summary === null || summary === undefined ? null : (JSON.parse(summary) as SessionSummary).status;
        return { session, logSeq: Number(logSeq ?? 0), seq: Number(seq ?? 0), status };
      }),
    );
  }

  async function rescan(): Promise<void> {
    if (stopping) return;
    scanning ??= (async () => {
      try {
        for (const s of await survey()) {
          if (superseded.has(s.session) || followers.has(s.session)) continue;
          if (s.logSeq > s.seq || (s.logSeq > 0 && s.status !== null && !TERMINAL.has(s.status))) follow(s.session);
        }
      } catch (err) {
        stats.errors++;
        logger.warn({ err: { name: (err as Error)?.name, message: (err as Error)?.message } }, "session rescan failed");
      } finally {
        scanning = undefined;
      }
    })();
    return scanning;
  }

  const timer = setInterval(() => void rescan(), rescanMs);
  timer.unref();
  void rescan();

  async function waitIdle(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (stopping) throw new Error("projector is stopping");
      await rescan();
      const lagging = (await survey()).filter((s) => !superseded.has(s.session) && s.logSeq > s.seq);
      if (lagging.length === 0) return;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`projector did not catch up within ${timeoutMs} ms (${lagging.length} sessions behind)`);
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          events.off("commit", done);
          events.off("idle", done);
          resolve();
        };
        const t = setTimeout(done, Math.min(left, 250));
        events.on("commit", done);
        events.on("idle", done);
      });
    }
  }

  async function stop(): Promise<void> {
    if (stopping) return;
    stopping = true;
    clearInterval(timer);
    for (const f of followers.values()) f.wake();
    for (const c of waiters) c.disconnect();
    const all = Promise.all([...followers.values()].map((f) => f.done));
    let t: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => (t = setTimeout(() => resolve("timeout"), stopTimeoutMs)));
    const r = await Promise.race([all.then(() => "done" as const), timedOut]);
    clearTimeout(t);
    if (r === "timeout") logger.warn({ followers: followers.size }, "projector stop timed out; steps in flight were left to their commit script");
    if (scanning) await scanning.catch(() => {});
  }

  return {
    stop,
    waitIdle,
    readModel: (session: string) => readModel(redis, session, { prefix }),
    get stats() {
      return { ...stats };
    },
    version,
  };
}
