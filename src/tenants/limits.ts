// A tenant's limits: a rolling 24-hour budget in USD, a maximum of turns running across the fleet,
// and what a turn does when the tenant is over budget at its start (`wait` until spend ages out, or
// `fail`). An operator sets them with `turnstream tenants set`; they live in one Redis hash, and count
// only when signed by an operator key the worker trusts, like trust rules: anyone who can write Redis
// can write the hash. A record that does not verify holds the tenant's turns back (fail closed); a
// tenant with no record gets the worker's defaults.
import { z as zod } from "zod";
import type { OperatorKey, OperatorKeyring } from "../decisions/index.ts";
import type { RedisClient } from "../log/index.ts";
import { tenantLimitsKey } from "./keys.ts";
import { tenantNameSchema } from "./names.ts";

const LIMITS_TAG = "turnstream.tenant-limits.v1";

export const OVER_BUDGET_POLICIES = ["wait", "fail"] as const;
export type OverBudgetPolicy = (typeof OVER_BUDGET_POLICIES)[number];

/** What an operator sets for a tenant. */
export const tenantLimitsSchema = zod.strictObject({
  tenant: tenantNameSchema,
  /** USD the tenant's turns may spend in any 24 hours. */
  budgetUsd: zod.number().positive().finite().optional(),
  /** Turns of the tenant that may run at once across the fleet. */
  maxRunning: zod.number().int().positive().max(1_000_000).optional(),
  overBudget: zod.enum(OVER_BUDGET_POLICIES),
  by: zod.string().min(1).max(200),
  at: zod.string().min(1).max(64),
  keyId: zod.string().min(1).max(64),
  signature: zod.string().min(1).max(200),
});
export type SignedTenantLimits = zod.infer<typeof tenantLimitsSchema>;
export type TenantLimitsInput = Omit<SignedTenantLimits, "keyId" | "signature">;

/** The limits a worker enforces for a tenant (none set: unlimited). */
export interface TenantLimits {
  budgetUsd?: number | undefined;
  maxRunning?: number | undefined;
  overBudget: OverBudgetPolicy;
}

/** The worker's limits for a tenant with no record of its own. */
export type TenantDefaults = TenantLimits;

export const NO_LIMITS: TenantLimits = Object.freeze({ overBudget: "wait" as const });

function limitsMessage(limits: TenantLimitsInput, keyId: string): Buffer {
  const fields = [
    LIMITS_TAG,
    limits.tenant,
    limits.budgetUsd ?? null,
    limits.maxRunning ?? null,
    limits.overBudget,
    limits.by,
    limits.at,
    keyId,
  ];
  return Buffer.from(JSON.stringify(fields));
}

export function signTenantLimits(key: OperatorKey, limits: TenantLimitsInput): SignedTenantLimits {
  return { ...limits, keyId: key.keyId, signature: key.sign(limitsMessage(limits, key.keyId)) };
}

/** What a stored record means to a worker: limits to enforce, or why it holds the tenant's turns back. */
export type LimitsVerdict = { ok: true; limits: TenantLimits; signed: boolean } | { ok: false; why: string };

/** Checks a stored record (raw JSON from the hash, or none) against the worker's keyring. */
export function limitsFromRecord(
  tenant: string,
  raw: string | null | undefined,
  keyring: OperatorKeyring | undefined,
  defaults: TenantDefaults = NO_LIMITS,
): LimitsVerdict {
  if (raw === null || raw === undefined) return { ok: true, limits: defaults, signed: false };
  let record: SignedTenantLimits;
  try {
    record = tenantLimitsSchema.parse(JSON.parse(raw));
  } catch {
    return { ok: false, why: `the limits stored for tenant ${tenant} are not a valid record` };
  }
  if (record.tenant !== tenant) return { ok: false, why: `the limits stored for tenant ${tenant} name another tenant` };
  if (keyring === undefined || keyring.size === 0)
    return {
      ok: false,
      why: `tenant ${tenant} has limits and this worker has no operator keys to check them (set TURNSTREAM_OPERATOR_KEYS)`,
    };
  if (!keyring.has(record.keyId))
    return {
      ok: false,
      why: `tenant ${tenant}'s limits are signed by ${record.keyId}, not one of this worker's operator keys`,
    };
  if (!keyring.verify(record.keyId, limitsMessage(record, record.keyId), record.signature))
    return { ok: false, why: `the signature of tenant ${tenant}'s limits does not match` };
  const { budgetUsd, maxRunning, overBudget } = record;
  return { ok: true, limits: { budgetUsd, maxRunning, overBudget }, signed: true };
}

export async function readLimitsRecord(redis: RedisClient, logPrefix: string, tenant: string): Promise<string | null> {
  return redis.hget(tenantLimitsKey(logPrefix), tenant);
}

/** Every stored record, by tenant. */
export async function readAllLimitsRecords(redis: RedisClient, logPrefix: string): Promise<Record<string, string>> {
  return redis.hgetall(tenantLimitsKey(logPrefix));
}

export async function writeLimits(redis: RedisClient, logPrefix: string, limits: SignedTenantLimits): Promise<void> {
  await redis.hset(tenantLimitsKey(logPrefix), limits.tenant, JSON.stringify(tenantLimitsSchema.parse(limits)));
}

/** Removes the tenant's record: its turns get the worker's defaults again. True when there was one. */
export async function clearLimits(redis: RedisClient, logPrefix: string, tenant: string): Promise<boolean> {
  return (await redis.hdel(tenantLimitsKey(logPrefix), tenant)) === 1;
}
