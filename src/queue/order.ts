// Per-session ordering and the session lease. The session's pending turns are a list; only its head
// may run, and only by whoever holds the lease (SET NX PX with a token, renewed while it runs). The
// log's fencing epoch backs this up: a holder that lost its lease and still writes gets `fenced`.
import { Job, type Queue } from "bullmq";
import { sessionKeys, type RedisClient } from "../log/index.ts";
import { orderKeys, type OrderKeys } from "./keys.ts";
import { orderScripts, type OrderScripts } from "./scripts.ts";

/** `cancelled`: a cancellation of the turn was requested (read in the same step). */
export type AcquireResult = (
  { status: "ok" } | { status: "wait"; head: string } | { status: "busy"; holder: string } | { status: "gone" }
) & { cancelled: boolean };

/** The session's head after a pop: `turn` "" when none; `deferred` when its job waits out a delay. */
export interface NextHead {
  turn: string;
  deferred: boolean;
}

function nextHead(reply: [string, number]): NextHead {
  return { turn: String(reply[0]), deferred: Number(reply[1]) === 1 };
}

/** A turn's session settings as it is registered (see SessionOrder.register). */
export interface RegisterSettings {
  onLostSession?: string | undefined;
  warm?: boolean | undefined;
  expectSession?: boolean | undefined;
  tenant?: string | undefined;
}

export interface Registered {
  created: boolean;
  /** The session's warm mode as stored. */
  warm: boolean;
  gone: boolean;
  /** The session belongs to another tenant than the turn named: nothing was written. */
  tenantConflict: boolean;
  /** The session's tenant (the one its first turn named). */
  tenant?: string;
}

export interface SessionOrderOptions {
  redis: RedisClient;
  /** The event log's key prefix (session keys share the log's per-session hash tag). */
  logPrefix: string;
  queue: Queue;
}

export class SessionOrder {
  readonly redis: RedisClient;
  readonly logPrefix: string;
  readonly queue: Queue;
  readonly #scripts: OrderScripts;

  constructor(options: SessionOrderOptions) {
    this.redis = options.redis;
    this.logPrefix = options.logPrefix;
    this.queue = options.queue;
    this.#scripts = orderScripts(options.redis);
  }

  keys(session: string): OrderKeys {
    return orderKeys(this.logPrefix, session);
  }

  /**
   * Appends the turn to the session's pending list unless it was registered before (`created`). A
   * `warm` given is stored as the session's warm mode from this turn on; `warm` returned is the
   * session's mode as stored (its turns run warm once one asked, until one says `warm: false`).
   * With `expectSession` (the caller saw the session's log in Redis) nothing is written and `gone` is
   * true when the log's meta has disappeared since: retention removed the session in between.
   * A session belongs to the tenant its first turn named: a later turn naming another is refused
   * (`tenantConflict`), one naming none gets the session's (`tenant`).
   */
  async register(session: string, turn: string, settings: RegisterSettings = {}): Promise<Registered> {
    const keys = this.keys(session);
    const { warm } = settings;
    const warmFlag = warm === undefined ? "" : warm ? "1" : "0";
    const [created, stored, tenant] = await this.#scripts.register(
      [keys.turns, keys.registered, keys.conf, sessionKeys(this.logPrefix, session).meta],
      turn,
      Date.now(),
      settings.onLostSession ?? "",
      warmFlag,
      settings.expectSession === true ? "1" : "",
      settings.tenant ?? "",
    );
    const registered: Registered = {
      created: Number(created) === 1,
      warm: stored === "1",
      gone: Number(created) === -1,
      tenantConflict: Number(created) === -2,
    };
    if (tenant !== "") registered.tenant = tenant;
    return registered;
  }

  async acquire(session: string, turn: string, token: string, leaseMs: number): Promise<AcquireResult> {
    const keys = this.keys(session);
    const [status, detail, cancelFlag] = await this.#scripts.acquire(
      [keys.turns, keys.lease, keys.cancel, keys.deferred],
      turn,
      token,
      leaseMs,
    );
    const cancelled = Number(cancelFlag) === 1;
    if (status === "ok") return { status, cancelled };
    if (status === "wait") return { status, head: detail, cancelled };
    if (status === "busy") return { status, holder: detail, cancelled };
    return { status: "gone", cancelled };
  }

  /** ok: lease extended; lost: someone else holds it or it expired; cancelled: cancellation requested. */
  async renew(session: string, turn: string, token: string, leaseMs: number): Promise<"ok" | "lost" | "cancelled"> {
    const keys = this.keys(session);
    return (await this.#scripts.renew([keys.lease, keys.cancel], token, leaseMs, turn)) as "ok" | "lost" | "cancelled";
  }

  /** Pops the finished head and releases the lease; returns the next head, null if not ours. */
  async finish(session: string, turn: string, token: string): Promise<NextHead | null> {
    const keys = this.keys(session);
    const next = await this.#scripts.finish([keys.turns, keys.lease, keys.cancel, keys.deferred], turn, token);
    return next === null || next === undefined ? null : nextHead(next);
  }

  async release(session: string, token: string): Promise<boolean> {
    return (await this.#scripts.release([this.keys(session).lease], token)) === 1;
  }

  /** Removes a turn that will never run (cancelled while queued, orphaned); returns the next head. */
  async drop(session: string, turn: string): Promise<NextHead> {
    const keys = this.keys(session);
    return nextHead(await this.#scripts.drop([keys.turns, keys.cancel, keys.deferred], turn));
  }

  async head(session: string): Promise<string | undefined> {
    return (await this.redis.lindex(this.keys(session).turns, 0)) ?? undefined;
  }

  async pending(session: string): Promise<string[]> {
    return this.redis.lrange(this.keys(session).turns, 0, -1);
  }

  async registeredAt(session: string, turn: string): Promise<number | undefined> {
    const stored = await this.redis.hget(this.keys(session).registered, turn);
    return stored === null ? undefined : Number(stored);
  }

  async requestCancel(session: string, turn: string): Promise<void> {
    await this.redis.sadd(this.keys(session).cancel, turn);
  }

  async cancelRequested(session: string, turn: string): Promise<boolean> {
    return (await this.redis.sismember(this.keys(session).cancel, turn)) === 1;
  }

  async onLostSession(session: string): Promise<string | undefined> {
    return (await this.redis.hget(this.keys(session).conf, "onLostSession")) ?? undefined;
  }

  /** Names `worker` as holding the session's warm CLI process for `ms` (the hand-off window). */
  async setWarmOwner(session: string, worker: string, ms: number): Promise<void> {
    await this.redis.set(this.keys(session).warm, worker, "PX", ms);
  }

  /** The worker holding the session's warm process, while its hand-off window lasts. */
  async warmOwner(session: string): Promise<string | undefined> {
    return (await this.redis.get(this.keys(session).warm)) ?? undefined;
  }

  /**
   * Wakes the next head's job if it was deferred (it found another turn at the head and waits out a
   * delay). One that was not is waiting or running already: no round trip for it.
   */
  async wake(next: NextHead | null): Promise<void> {
    if (next !== null && next.deferred) await this.promote(next.turn);
  }

  /** Wakes the job of `turn` if it is waiting out a delay, so the next turn starts at once. */
  async promote(turn: string): Promise<void> {
    if (turn === "") return;
    try {
      // BullMQ's promote script itself refuses a job that is not delayed, so there is no need to
      // load the job first (two round trips fewer on every turn's end): a handle with its id will do.
      await new Job(this.queue, "turn", {}, {}, turn).promote();
    } catch {
      // Not delayed (waiting, or a worker has it) or gone: nothing to wake.
    }
  }

  /** Deletes the session's ordering keys (tests, operators). */
  async destroy(session: string): Promise<void> {
    const keys = this.keys(session);
    for (const key of [keys.turns, keys.registered, keys.lease, keys.cancel, keys.conf, keys.deferred, keys.warm])
      await this.redis.del(key);
  }
}
