// Tenants: whose turn it is, what each may spend and run at once, and fair share between them.
export { isTenantName, tenantNameProblem, tenantNameSchema, TENANT_NAME_PATTERN } from "./names.ts";
export {
  fairShareKey,
  tenantKeys,
  tenantLimitsKey,
  tenantLimitsNewestKey,
  tenantsSeenKey,
  type TenantKeys,
} from "./keys.ts";
export {
  clearLimits,
  limitsFromRecord,
  NO_LIMITS,
  OVER_BUDGET_POLICIES,
  readAllLimitsRecords,
  readLimitsRecord,
  signTenantLimits,
  tenantLimitsFields,
  tenantLimitsSchema,
  writeLimits,
  type LimitsVerdict,
  type OverBudgetPolicy,
  type SignedTenantLimits,
  type SignedVersion,
  type TenantDefaults,
  type TenantLimits,
  type TenantLimitsInput,
} from "./limits.ts";
export { TenantLimitsReader, type TenantLimitsReaderOptions } from "./limits-reader.ts";
export {
  BUDGET_WINDOW_MS,
  HOLD_MS,
  SPEND_BUCKET_MS,
  TenantLedger,
  type Admission,
  type LedgerWindow,
  type Reservation,
  type TenantSpend,
} from "./ledger.ts";
export { fairSharePriority } from "./fair-share.ts";
export { tenantRows, type LimitsCheck, type TenantRow, type TenantRowsOptions } from "./overview.ts";
export {
  chargeOf,
  tenantBudgetPolicy,
  TENANT_BUDGET_CODE,
  TENANT_LIMITS_CODE,
  type TenantBudgetPolicyOptions,
} from "./budget-policy.ts";
