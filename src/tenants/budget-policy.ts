// The gateway's per-call check of tenants' budgets: a turn of a tenant over its 24-hour budget gets
// no further model call, so a runaway turn stops mid-way. Every call of a tenant's turn is counted
// against the tenant once it ended (its cost from the answer's usage). A cost that could not be
// counted yet is counted before the tenant's next call goes out; while it cannot be, the tenant's
// calls are refused as overloaded (the CLI retries): a budget never lets spend through uncounted.
import type { GatewayPolicy, ModelCall, PolicyCall, PolicyDecision } from "../gateway/index.ts";
import type { TenantLedger } from "./ledger.ts";
import type { LimitsVerdict } from "./limits.ts";

export interface TenantBudgetPolicyOptions {
  ledger: TenantLedger;
  /** The tenant's limits as this worker enforces them (cached by the caller). */
  limitsOf(tenant: string): Promise<LimitsVerdict>;
  warn(message: string, err: unknown): void;
}

/** The refusal code a call over its tenant's budget is recorded with. */
export const TENANT_BUDGET_CODE = "tenant_budget";
/** The refusal code of a call whose tenant's limits do not verify. */
export const TENANT_LIMITS_CODE = "tenant_limits";

const usd = (amount: number): string => `$${amount.toFixed(2)}`;

/** A call's cost waiting to be counted. */
interface Uncounted {
  callId: string;
  costUsd: number;
}

export function tenantBudgetPolicy(options: TenantBudgetPolicyOptions): GatewayPolicy {
  const { ledger, limitsOf, warn } = options;
  const uncounted = new Map<string, Uncounted[]>();

  const draining = new Map<string, Promise<boolean>>();

  /** Counts what waits for the tenant, one drain at a time; false when Redis would not take it. */
  function countWaiting(tenant: string): Promise<boolean> {
    const before = draining.get(tenant) ?? Promise.resolve(true);
    const drained = before.then(() => drain(tenant));
    draining.set(tenant, drained);
    void drained.finally(() => {
      if (draining.get(tenant) === drained) draining.delete(tenant);
    });
    return drained;
  }

  async function drain(tenant: string): Promise<boolean> {
    const waiting = uncounted.get(tenant) ?? [];
    while (waiting.length > 0) {
      try {
        await ledger.spend(tenant, waiting[0]!.callId, waiting[0]!.costUsd);
      } catch (err) {
        warn(`a model call's cost for tenant ${tenant} could not be counted yet`, err);
        return false;
      }
      waiting.shift();
    }
    uncounted.delete(tenant);
    return true;
  }

  async function beforeRequest(call: PolicyCall): Promise<PolicyDecision> {
    const tenant = call.run.tenant;
    if (tenant === undefined) return { action: "allow" };
    const verdict = await limitsOf(tenant);
    if (!verdict.ok)
      return {
        action: "refuse",
        status: 403,
        type: "permission_error",
        message: verdict.why,
        code: TENANT_LIMITS_CODE,
      };
    if (!(await countWaiting(tenant)))
      return {
        action: "refuse",
        status: 529,
        type: "overloaded_error",
        message: "turnstream gateway: the tenant's spend could not be counted; try again shortly",
        retryAfterS: 5,
      };
    const budget = verdict.limits.budgetUsd;
    if (budget === undefined) return { action: "allow" };
    const { spentUsd } = await ledger.spent(tenant);
    if (spentUsd < budget) return { action: "allow" };
    return {
      action: "refuse",
      status: 400,
      type: "invalid_request_error",
      message: `turnstream: tenant ${tenant} spent ${usd(spentUsd)} of its ${usd(budget)} budget for 24 hours; the turn stops here`,
      code: TENANT_BUDGET_CODE,
    };
  }

  function afterResponse(call: PolicyCall, outcome: ModelCall): void {
    const tenant = call.run.tenant;
    if (tenant === undefined || outcome.costUsd === undefined || outcome.costUsd <= 0) return;
    const waiting = uncounted.get(tenant) ?? [];
    waiting.push({ callId: outcome.callId, costUsd: outcome.costUsd });
    uncounted.set(tenant, waiting);
    // Counted now, in the background; the tenant's next call waits for it either way.
    void countWaiting(tenant);
  }

  return { beforeRequest, afterResponse };
}
