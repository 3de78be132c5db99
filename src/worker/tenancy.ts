// A tenant's turn runs only while its tenant's limits allow: before its attempts start, the job takes
// one of the tenant's running slots (checked against the running limit and the 24-hour budget in one
// step); the slot lapses with the session lease unless renewed with it, so a crashed worker leaks none.
// A turn whose tenant is at its running limit waits, delayed, until a slot frees (the release wakes
// it); one whose tenant is over budget waits until spend ages out or fails, as the tenant's policy
// says. Its CLI's own `--max-budget-usd` is capped at what the tenant has left. The job's tenant is
// checked against its session's (fixed at enqueue): a job rewritten in Redis runs as nobody else.
import { parseOperatorKeys } from "../decisions/index.ts";
import type { TurnFailedData } from "../events/index.ts";
import type { GatewayPolicy } from "../gateway/index.ts";
import type { Logger } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { orderKeys, type TurnJob } from "../queue/index.ts";
import {
  TenantLedger,
  TenantLimitsReader,
  tenantBudgetPolicy,
  type Reservation,
  type TenantLimits,
} from "../tenants/index.ts";
import type { WorkerSettings } from "./options.ts";

/** The worker's account of tenants: the shared ledger and the limits it enforces. */
export interface WorkerTenants {
  ledger: TenantLedger;
  limits: TenantLimitsReader;
  /** The tenant a session's first turn named, as its enqueue stored it (undefined: none). */
  sessionTenant(session: string): Promise<string | undefined>;
}

export function workerTenants(redis: RedisClient, settings: WorkerSettings): WorkerTenants {
  const keyring = settings.operatorKeys === undefined ? undefined : parseOperatorKeys(settings.operatorKeys);
  return {
    ledger: new TenantLedger(redis, settings.logPrefix, settings.tenants.window),
    limits: new TenantLimitsReader({
      redis,
      logPrefix: settings.logPrefix,
      keyring,
      defaults: settings.tenants.defaults,
    }),
    sessionTenant: async (session) =>
      (await redis.hget(orderKeys(settings.logPrefix, session).conf, "tenant")) ?? undefined,
  };
}

/** The gateway's per-call budget check over the worker's ledger. */
export function tenantGatewayPolicy(tenants: WorkerTenants, logger: Logger): GatewayPolicy {
  return tenantBudgetPolicy({
    ledger: tenants.ledger,
    limitsOf: (tenant) => tenants.limits.limitsOf(tenant),
    warn: (message, err) => logger.warn({ err: { message: (err as Error)?.message } }, message),
  });
}

/** A running slot of the turn's tenant, held for the job's attempts. */
export class TenantSlot {
  readonly tenant: string;
  /** The turn's CLI budget was lowered to what the tenant had left: the CLI stopping at it is the tenant's limit. */
  budgetCapped = false;
  readonly #tenants: WorkerTenants;
  readonly #token: string;
  #released = false;

  constructor(tenants: WorkerTenants, tenant: string, token: string) {
    this.#tenants = tenants;
    this.tenant = tenant;
    this.#token = token;
  }

  /** Extends the slot with the session lease. */
  renew(leaseMs: number): Promise<boolean> {
    return this.#tenants.ledger.renew(this.tenant, this.#token, leaseMs);
  }

  /** Gives the slot back; returns the job that waited for one, to wake. Once only. */
  async release(): Promise<string | undefined> {
    if (this.#released) return undefined;
    this.#released = true;
    return this.#tenants.ledger.release(this.tenant, this.#token);
  }
}

/** What the tenant's limits say of a turn about to run. */
export type TenantEntry =
  | { kind: "run"; slot: TenantSlot | undefined; job: TurnJob }
  | { kind: "wait"; untilMs: number; blocked: boolean; why: string }
  | { kind: "fail"; failed: Omit<TurnFailedData, "attempt">; why: string };

const SIGNED_ONLY = "this worker runs only turns of tenants with signed limits (TURNSTREAM_TENANTS_SIGNED_ONLY)";

const usd = (amount: number): string => `$${amount.toFixed(2)}`;
const tenantOf = (tenant: string | undefined): string => (tenant === undefined ? "no tenant" : `tenant ${tenant}`);

/** The longest an over-budget turn waits before it looks again (spend may have been corrected meanwhile). */
const OVER_BUDGET_RECHECK_MS = 15 * 60_000;

/**
 * Takes a slot of the job's tenant, or says why the turn must wait or fail. A turn without a tenant
 * runs as it is. `capped` is the job with `maxBudgetUsd` lowered to what the tenant has left.
 */
export async function enterTenant(
  tenants: WorkerTenants,
  settings: Pick<WorkerSettings, "leaseMs" | "gateway" | "tenants">,
  job: TurnJob,
  leaseToken: string,
): Promise<TenantEntry> {
  const tenant = job.tenant;
  const owner = await tenants.sessionTenant(job.session);
  if (owner !== tenant)
    return refuse(
      "tenant_limits",
      "TenantMismatch",
      `the turn's job names ${tenantOf(tenant)} and its session ${job.session} belongs to ${tenantOf(owner)}: the job was changed after it was queued`,
    );
  const signedOnly = settings.tenants.signedOnly;
  if (tenant === undefined)
    return signedOnly
      ? refuse("tenant_limits", "TenantRequired", `the turn names no tenant, and ${SIGNED_ONLY}`)
      : { kind: "run", slot: undefined, job };
  const verdict = await tenants.limits.limitsOf(tenant);
  if (!verdict.ok) return refuse("tenant_limits", "TenantLimitsInvalid", verdict.why);
  if (signedOnly && !verdict.signed)
    return refuse(
      "tenant_limits",
      "TenantLimitsUnsigned",
      `tenant ${tenant} has no signed limits, and ${SIGNED_ONLY}; an operator signs limits for it`,
    );
  const limits = verdict.limits;
  if (limits.budgetUsd !== undefined && settings.gateway !== "broker")
    return refuse(
      "tenant_limits",
      "TenantBudgetNeedsGateway",
      `tenant ${tenant} has a budget, and this worker runs without its model gateway (TURNSTREAM_GATEWAY=passthrough), so it cannot count the turn's model calls; run the tenant's turns on brokered workers`,
    );
  // The job's id is its turn's: once the turn has its slot, it leaves the blocked list.
  const reservation = await tenants.ledger.reserve(tenant, leaseToken, settings.leaseMs, limits, job.turn);
  return entryOf(tenants, tenant, job, leaseToken, limits, reservation);
}

function entryOf(
  tenants: WorkerTenants,
  tenant: string,
  job: TurnJob,
  leaseToken: string,
  limits: TenantLimits,
  reservation: Reservation,
): TenantEntry {
  switch (reservation.status) {
    case "ok": {
      const slot = new TenantSlot(tenants, tenant, leaseToken);
      const runs = capped(job, limits, reservation);
      slot.budgetCapped = runs !== job;
      return { kind: "run", slot, job: runs };
    }
    case "at_limit":
      return {
        kind: "wait",
        untilMs: Number.POSITIVE_INFINITY,
        blocked: true,
        why: `tenant ${tenant} runs ${reservation.running} turns, its limit`,
      };
    case "over_budget": {
      const why = `tenant ${tenant} spent ${usd(reservation.spentUsd)} of its ${usd(limits.budgetUsd ?? 0)} budget for 24 hours`;
      if (limits.overBudget === "fail")
        return refuse("tenant_budget", "TenantOverBudget", `${why}; its policy is to fail such turns`);
      const untilMs = Math.min(reservation.freesAt, Date.now() + OVER_BUDGET_RECHECK_MS);
      return { kind: "wait", untilMs, blocked: false, why: `${why}; the turn waits for spend to age out` };
    }
  }
}

function refuse(errorKind: "tenant_budget" | "tenant_limits", name: string, message: string): TenantEntry {
  return { kind: "fail", failed: { errorKind, error: { name, message }, retryable: false }, why: message };
}

/** The job with its CLI budget no larger than what the tenant has left. */
function capped(job: TurnJob, limits: TenantLimits, reservation: { spentUsd: number }): TurnJob {
  if (limits.budgetUsd === undefined) return job;
  const left = Math.max(0, limits.budgetUsd - reservation.spentUsd);
  const own = job.options.maxBudgetUsd;
  if (own !== undefined && own <= left) return job;
  // The CLI refuses a budget of 0: a cent's fraction is as good as none.
  return { ...job, options: { ...job.options, maxBudgetUsd: Math.max(left, 0.000001) } };
}
