// What an operator sees of each tenant: its limits record and whether it verifies, what it spent in
// the budget window, how many of its turns run now. `turnstream tenants`, `turnstream status` and the
// dashboard show the same rows, built here. Tenant names come from Redis, where anyone who can write
// may add one: every text a row carries has been through the caller's `show` (escaping, scrubbing).
import type { OperatorKeyring } from "../decisions/index.ts";
import type { RedisClient } from "../log/index.ts";
import { isTenantName } from "./names.ts";
import { tenantLimitsNewestKey } from "./keys.ts";
import { TenantLedger, type LedgerWindow } from "./ledger.ts";
import {
  limitsFromRecord,
  readAllLimitsRecords,
  readLimitsRecord,
  tenantLimitsSchema,
  versionOf,
  type OverBudgetPolicy,
  type SignedTenantLimits,
  type SignedVersion,
} from "./limits.ts";
import { heldBackWhy, newestVersion } from "./limits-reader.ts";

/**
 * How a tenant's limits stand: `none` (no record: the workers' defaults apply), `verified` (signed by
 * one of the keys given), `unchecked` (a well-formed record, and no keys given to check it), `fails`
 * (it does not verify: workers fail the tenant's turns with `tenant_limits`).
 */
export type LimitsCheck = "none" | "verified" | "unchecked" | "fails";

/** One tenant as the operator's surfaces show it. Limits are null when not set, or when they do not verify. */
export interface TenantRow {
  /** The name as shown (escaped, scrubbed): equal to the stored name for every valid name without a secret's shape. */
  tenant: string;
  /** False for a stored name no producer or worker would accept: someone wrote Redis by hand. */
  nameValid: boolean;
  budgetUsd: number | null;
  spentUsd: number;
  /** Spent as a percentage of the budget, one decimal; null without a budget. */
  budgetPct: number | null;
  running: number;
  maxRunning: number | null;
  overBudgetPolicy: OverBudgetPolicy | null;
  /** Spent at least the budget now; null when the limits are the workers' defaults or do not verify. */
  overBudget: boolean | null;
  limits: LimitsCheck;
  /** Why the record does not verify (limits `fails`). */
  problem: string | null;
  setBy: string | null;
  setAt: string | null;
  keyId: string | null;
}

export interface TenantRowsOptions {
  redis: RedisClient;
  logPrefix: string;
  /** The operator keys to check records against; undefined: records are shown `unchecked`. */
  keyring: OperatorKeyring | undefined;
  /** How a text from Redis is shown (escaped for a terminal or a page, secrets scrubbed). */
  show: (text: string) => string;
  /** Only these tenants (listed even when nothing is known of them); default: every tenant seen or with limits. */
  only?: readonly string[] | undefined;
  /** The budget's window as the workers count it (default 24 h). */
  window?: LedgerWindow | undefined;
  /** The most tenants read from the ledger's list of those seen (default 1000). */
  seenLimit?: number | undefined;
}

type RecordFields = Pick<SignedTenantLimits, "budgetUsd" | "maxRunning" | "overBudget" | "by" | "at" | "keyId">;

interface RecordCheck {
  limits: LimitsCheck;
  record: RecordFields | undefined;
  problem: string | undefined;
  /** The stored record's signing, a cleared one's too (undefined: no record, or one that fails). */
  version: SignedVersion | undefined;
}

/** What a stored record says and whether it holds, as a worker with `keyring` would take it. */
function checkRecord(tenant: string, raw: string | undefined, keyring: OperatorKeyring | undefined): RecordCheck {
  if (raw === undefined) return { limits: "none", record: undefined, problem: undefined, version: undefined };
  let parsed: SignedTenantLimits | undefined;
  try {
    parsed = tenantLimitsSchema.parse(JSON.parse(raw));
  } catch {
    parsed = undefined;
  }
  // A malformed record, or one naming another tenant, fails whatever keys are given: limitsFromRecord says why.
  if (parsed === undefined || parsed.tenant !== tenant || keyring !== undefined) {
    const verdict = limitsFromRecord(tenant, raw, keyring);
    if (!verdict.ok) return { limits: "fails", record: undefined, problem: verdict.why, version: undefined };
  }
  const version = versionOf(parsed!);
  // A record that clears the tenant's limits (signed, so a deletion cannot pass for one) sets none.
  if (parsed!.cleared === true) return { limits: "none", record: undefined, problem: undefined, version };
  return { limits: keyring === undefined ? "unchecked" : "verified", record: parsed, problem: undefined, version };
}

/**
 * Workers remember the newest limits they verified for each tenant: a record older than those, or
 * none at all after them, was put back or removed by someone who can write Redis, and workers hold
 * the tenant's turns back. The overview says so too, by the workers' own test.
 */
function againstNewest(tenant: string, check: RecordCheck, newestStored: string | undefined): RecordCheck {
  if (check.limits === "fails") return check;
  const problem = heldBackWhy(tenant, check.version, newestVersion(newestStored));
  return problem === undefined ? check : { limits: "fails", record: undefined, problem, version: check.version };
}

/** The tenants asked for, else every one the ledger has seen or that has a record. */
async function tenantsListed(
  options: TenantRowsOptions,
  records: Readonly<Partial<Record<string, string>>>,
): Promise<string[]> {
  if (options.only !== undefined) return [...new Set(options.only)];
  const ledger = new TenantLedger(options.redis, options.logPrefix, options.window);
  const seen = await ledger.seen(options.seenLimit ?? 1000);
  return [...new Set([...seen, ...Object.keys(records)])];
}

/** One row per tenant, by name. */
export async function tenantRows(options: TenantRowsOptions): Promise<TenantRow[]> {
  const { redis, logPrefix, keyring, show } = options;
  const records: Partial<Record<string, string>> =
    options.only === undefined
      ? await readAllLimitsRecords(redis, logPrefix)
      : Object.fromEntries(
          await Promise.all(
            options.only.map(async (tenant) => [
              tenant,
              (await readLimitsRecord(redis, logPrefix, tenant)) ?? undefined,
            ]),
          ),
        );
  const ledger = new TenantLedger(redis, logPrefix, options.window);
  const newest: Partial<Record<string, string>> = await redis.hgetall(tenantLimitsNewestKey(logPrefix));
  const tenants = (await tenantsListed(options, records)).sort();
  return Promise.all(
    tenants.map(async (tenant): Promise<TenantRow> => {
      const [{ spentUsd }, running] = await Promise.all([ledger.spent(tenant), ledger.running(tenant)]);
      const { limits, record, problem } = againstNewest(
        tenant,
        checkRecord(tenant, records[tenant], keyring),
        newest[tenant],
      );
      const budgetUsd = record?.budgetUsd ?? null;
      return {
        tenant: show(tenant),
        nameValid: isTenantName(tenant),
        budgetUsd,
        spentUsd,
        budgetPct: budgetUsd === null ? null : Math.round((spentUsd / budgetUsd) * 1000) / 10,
        running,
        maxRunning: record?.maxRunning ?? null,
        overBudgetPolicy: record?.overBudget ?? null,
        // The reserve's own test: spent at least the budget.
        overBudget: record === undefined ? null : budgetUsd !== null && spentUsd >= budgetUsd,
        limits,
        problem: problem === undefined ? null : show(problem),
        setBy: record === undefined ? null : show(record.by),
        setAt: record === undefined ? null : show(record.at),
        keyId: record === undefined ? null : show(record.keyId),
      };
    }),
  );
}
