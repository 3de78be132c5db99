// The fleet's shared account of each tenant: which turns run now (reservations that lapse with their
// lease, so a crashed worker leaks nothing) and what its model calls cost in the last 24 hours (in
// buckets, each call counted once by its id). Reserving checks both limits in one step.
import { luaScript, scriptCommand, type RedisClient } from "../log/index.ts";
import { tenantKeys, tenantsSeenKey } from "./keys.ts";
import type { TenantLimits } from "./limits.ts";

const RESERVE = luaScript("turnstreamTenantReserve", 3, new URL("./lua/reserve.lua", import.meta.url));
const RENEW = luaScript("turnstreamTenantRenew", 1, new URL("./lua/renew.lua", import.meta.url));
const RELEASE = luaScript("turnstreamTenantRelease", 2, new URL("./lua/release.lua", import.meta.url));
const SPEND = luaScript("turnstreamTenantSpend", 3, new URL("./lua/spend.lua", import.meta.url));
const ADMIT = luaScript("turnstreamTenantAdmit", 3, new URL("./lua/admit.lua", import.meta.url));

export const BUDGET_WINDOW_MS = 24 * 60 * 60 * 1000;
export const SPEND_BUCKET_MS = 5 * 60 * 1000;

/** Costs are kept in whole micro-USD; a call's cost is rounded up, so rounding never frees budget. */
const MICROS = 1_000_000;
export const toMicros = (usd: number): number => Math.ceil(usd * MICROS - 1e-6);
export const fromMicros = (micros: number): number => micros / MICROS;

/**
 * How long a model call's hold lasts uncounted. A call still out past it (a stream of many minutes) is
 * counted at its hold, the most it could cost; one whose worker died is counted so once it lapses.
 */
export const HOLD_MS = 30 * 60 * 1000;

/** How long the blocked list outlives the last job that waited (each waiting job notes itself again when it wakes). */
const BLOCKED_MS = 60 * 60 * 1000;

export interface LedgerWindow {
  windowMs: number;
  bucketMs: number;
}

export type Reservation =
  | { status: "ok"; running: number; spentUsd: number }
  | { status: "at_limit"; running: number; spentUsd: number }
  /** `freesAt`: when the oldest spend in the window ages out (ms), the earliest the tenant may be under. */
  | { status: "over_budget"; running: number; spentUsd: number; freesAt: number };

/**
 * Whether a model call may go out (see lua/admit.lua): `ok` (its hold is taken), `wait` (other calls
 * out hold what is left), or `over` (the budget is spent).
 */
export interface Admission {
  status: "ok" | "wait" | "over";
  spentUsd: number;
  heldUsd: number;
}

export interface TenantSpend {
  spentUsd: number;
  /** When the oldest spend in the window ages out (ms), undefined when nothing was spent. */
  freesAt: number | undefined;
}

export class TenantLedger {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #window: LedgerWindow;
  readonly #reserve;
  readonly #renew;
  readonly #release;
  readonly #spend;
  readonly #admit;

  constructor(
    redis: RedisClient,
    logPrefix: string,
    window: LedgerWindow = { windowMs: BUDGET_WINDOW_MS, bucketMs: SPEND_BUCKET_MS },
  ) {
    this.#redis = redis;
    this.#prefix = logPrefix;
    this.#window = window;
    this.#reserve = scriptCommand<[string, number, number, number]>(redis, RESERVE);
    this.#renew = scriptCommand<number>(redis, RENEW);
    this.#release = scriptCommand<string>(redis, RELEASE);
    this.#spend = scriptCommand<number>(redis, SPEND);
    this.#admit = scriptCommand<[string, number, number]>(redis, ADMIT);
  }

  #keys(tenant: string) {
    return tenantKeys(this.#prefix, tenant);
  }

  #freesAt(oldestBucket: number): number {
    return (oldestBucket + 1) * this.#window.bucketMs + this.#window.windowMs;
  }

  /**
   * Takes a running slot for the turn holding `token`, unless the tenant is at its limit or over
   * budget. `jobId`: the turn's job, taken off the blocked list once it has its slot.
   */
  async reserve(
    tenant: string,
    token: string,
    leaseMs: number,
    limits: TenantLimits,
    jobId = "",
  ): Promise<Reservation> {
    const keys = this.#keys(tenant);
    const budget = limits.budgetUsd === undefined ? 0 : toMicros(limits.budgetUsd);
    const [status, running, spent, oldest] = await this.#reserve(
      [keys.running, keys.spend, keys.blocked],
      [token, leaseMs, limits.maxRunning ?? 0, budget, this.#window.bucketMs, this.#window.windowMs, jobId],
    );
    const counts = { running: Number(running), spentUsd: fromMicros(Number(spent)) };
    if (status === "over_budget") return { status, ...counts, freesAt: this.#freesAt(Number(oldest)) };
    if (status !== "ok" && status !== "at_limit") throw new Error(`tenant reserve answered ${String(status)}`);
    if (status === "ok") await this.#redis.zadd(tenantsSeenKey(this.#prefix), Date.now(), tenant);
    return { status, ...counts };
  }

  /** Extends the slot with the lease; false when it had lapsed. */
  async renew(tenant: string, token: string, leaseMs: number): Promise<boolean> {
    return (await this.#renew([this.#keys(tenant).running], [token, leaseMs])) === 1;
  }

  /** Gives the slot back; returns the id of a job that waits for one, to wake. */
  async release(tenant: string, token: string): Promise<string | undefined> {
    const keys = this.#keys(tenant);
    const woken = await this.#release([keys.running, keys.blocked], [token]);
    return woken === "" ? undefined : woken;
  }

  /** Notes a job that found the tenant at its running limit, for the next release to wake. */
  async block(tenant: string, jobId: string): Promise<void> {
    const blocked = this.#keys(tenant).blocked;
    await this.#redis.multi().lrem(blocked, 0, jobId).lpush(blocked, jobId).pexpire(blocked, BLOCKED_MS).exec();
  }

  /**
   * Asks whether a model call of the tenant may go out under `budgetUsd`, holding `holdUsd` (the most
   * it can cost) until spend() counts it.
   */
  async admit(tenant: string, callId: string, holdUsd: number, budgetUsd: number): Promise<Admission> {
    const keys = this.#keys(tenant);
    const [status, spent, held] = await this.#admit(
      [keys.spend, keys.calls, keys.holds],
      [callId, toMicros(holdUsd), HOLD_MS, toMicros(budgetUsd), this.#window.bucketMs, this.#window.windowMs],
    );
    if (status !== "ok" && status !== "wait" && status !== "over")
      throw new Error(`tenant admit answered ${String(status)}`);
    return { status, spentUsd: fromMicros(Number(spent)), heldUsd: fromMicros(Number(held)) };
  }

  /** Counts a call's cost once (by its id) and drops its hold. False when it had been counted before. */
  async spend(tenant: string, callId: string, usd: number): Promise<boolean> {
    const keys = this.#keys(tenant);
    const counted = await this.#spend(
      [keys.spend, keys.calls, keys.holds],
      [callId, toMicros(usd), this.#window.bucketMs, this.#window.windowMs],
    );
    return counted === 1;
  }

  /** What the tenant spent in the window up to `now`. */
  async spent(tenant: string, now = Date.now()): Promise<TenantSpend> {
    const buckets = await this.#redis.hgetall(this.#keys(tenant).spend);
    const first = Math.floor((now - this.#window.windowMs) / this.#window.bucketMs);
    let micros = 0;
    let oldest: number | undefined;
    for (const [field, value] of Object.entries(buckets)) {
      const bucket = Number(field);
      if (bucket < first) continue;
      micros += Number(value);
      oldest = oldest === undefined ? bucket : Math.min(oldest, bucket);
    }
    return { spentUsd: fromMicros(micros), freesAt: oldest === undefined ? undefined : this.#freesAt(oldest) };
  }

  /** Turns of the tenant running now (slots not yet lapsed). */
  async running(tenant: string, now = Date.now()): Promise<number> {
    return this.#redis.zcount(this.#keys(tenant).running, `(${now}`, "+inf");
  }

  /** Tenants that ran a turn, newest first. */
  async seen(limit = 1000): Promise<string[]> {
    return this.#redis.zrevrange(tenantsSeenKey(this.#prefix), 0, limit - 1);
  }
}
