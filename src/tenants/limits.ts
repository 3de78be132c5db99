// A tenant's limits: a rolling 24-hour budget in USD, a maximum of turns running across the fleet,
// and what a turn does when the tenant is over budget at its start (`wait` until spend ages out, or
// `fail`). An operator sets them with `turnstream tenants set`; they live in one Redis hash, and count
// only when signed by an operator key the worker trusts, like trust rules: anyone who can write Redis
// can write the hash. A record that does not verify holds the tenant's turns back (fail closed); a
// tenant with no record gets the worker's defaults. Whoever can write the hash can also put back an
// older signed record or delete the newest: workers remember the newest record they verified for each
// tenant (limits-reader.ts), so only a newer signed record changes a tenant's limits, and going back
// to the defaults takes one too (`clearLimits`).
import { z as zod } from "zod";
import type { OperatorKey, OperatorKeyring } from "../decisions/index.ts";
import type { RedisClient } from "../log/index.ts";
import { tenantLimitsKey } from "./keys.ts";
import { tenantNameSchema } from "./names.ts";

const LIMITS_TAG = "turnstream.tenant-limits.v1";

export const OVER_BUDGET_POLICIES = ["wait", "fail"] as const;
export type OverBudgetPolicy = (typeof OVER_BUDGET_POLICIES)[number];

/** The fields of a tenant's limits record (its checks are tenantLimitsSchema's). */
export const tenantLimitsFields = zod.strictObject({
  tenant: tenantNameSchema,
  /** USD the tenant's turns may spend in any 24 hours. */
  budgetUsd: zod.number().positive().finite().optional(),
  /** Turns of the tenant that may run at once across the fleet. */
  maxRunning: zod.number().int().positive().max(1_000_000).optional(),
  overBudget: zod.enum(OVER_BUDGET_POLICIES),
  /** The tenant's limits are the workers' defaults again (`clearLimits`): it sets none of its own. */
  cleared: zod.literal(true).optional(),
  by: zod.string().min(1).max(200),
  /** When it was signed: a record older than the newest a worker has verified does not count. */
  at: zod.string().min(1).max(64),
  keyId: zod.string().min(1).max(64),
  signature: zod.string().min(1).max(200),
});

/** What an operator sets for a tenant. */
export const tenantLimitsSchema = tenantLimitsFields.refine(
  (limits) => limits.cleared !== true || (limits.budgetUsd === undefined && limits.maxRunning === undefined),
  {
    message: "a cleared record sets no limits",
  },
);
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
    // Only a cleared record says so: the message of every other record is what it always was.
    ...(limits.cleared === true ? ["cleared"] : []),
  ];
  return Buffer.from(JSON.stringify(fields));
}

export function signTenantLimits(key: OperatorKey, limits: TenantLimitsInput): SignedTenantLimits {
  return { ...limits, keyId: key.keyId, signature: key.sign(limitsMessage(limits, key.keyId)) };
}

/** A verified record's place among the tenant's records: when it was signed (ms), and its signature. */
export interface SignedVersion {
  atMs: number;
  signature: string;
}

/** When `record` was signed, and its signature: its place among the tenant's records. */
export function versionOf(record: Pick<SignedTenantLimits, "at" | "signature">): SignedVersion {
  return { atMs: Date.parse(record.at), signature: record.signature };
}

/**
 * What a stored record means to a worker: limits to enforce, or why it holds the tenant's turns back.
 * `version`: the verified record's, for the check against the newest one seen (limits-reader.ts).
 */
export type LimitsVerdict =
  { ok: true; limits: TenantLimits; signed: boolean; version?: SignedVersion | undefined } | { ok: false; why: string };

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
  const version = versionOf(record);
  if (!Number.isFinite(version.atMs))
    return {
      ok: false,
      why: `tenant ${tenant}'s limits say they were signed at ${JSON.stringify(record.at)}, not a time`,
    };
  if (record.cleared === true) return { ok: true, limits: defaults, signed: true, version };
  const { budgetUsd, maxRunning, overBudget } = record;
  return { ok: true, limits: { budgetUsd, maxRunning, overBudget }, signed: true, version };
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

/**
 * Puts the tenant back on the workers' defaults with a signed record that says so. Deleting the record
 * would not: once workers have verified limits for a tenant, a missing record holds its turns back,
 * since whoever can write Redis can delete one.
 */
export async function clearLimits(
  redis: RedisClient,
  logPrefix: string,
  key: OperatorKey,
  clear: Pick<TenantLimitsInput, "tenant" | "by" | "at">,
): Promise<void> {
  await writeLimits(redis, logPrefix, signTenantLimits(key, { ...clear, overBudget: "wait", cleared: true }));
}
