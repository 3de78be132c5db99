// The gateway's per-call check of tenants' budgets: a turn of a tenant over its 24-hour budget gets
// no further model call, so a runaway turn stops mid-way. Every call of a tenant's turn is counted
// against the tenant once it ended (its cost from the answer's usage). A cost that could not be
// counted yet is counted before the tenant's next call goes out; while it cannot be, the tenant's
// calls are refused as overloaded (the CLI retries): a budget never lets spend through uncounted.
//
// Calls made at once would all pass a check of what was spent before any of them is counted (a run
// can fire hundreds with its token). So each Messages call of a tenant with a budget goes out only
// with a hold on the most it can cost (its body's bound at its model's price, see worstCaseCostUsd),
// taken in the same Redis step that checks the budget, fleet-wide: while other calls are out, one goes
// out only if every hold fits in what is left; with none out, one may go out whatever it holds. So a
// tenant overshoots its budget by at most one call's cost (and by what holds understate, which only a
// body whose bound does not hold can make them do). A call whose answer ends without its final usage
// (the client hung up, the stream broke) or whose usage is missing is counted at its hold, the most
// it can have cost; one of a model the price table does not know, at the table's dearest rates.
import {
  costAtMostUsd,
  type GatewayPolicy,
  type ModelCall,
  type PolicyCall,
  type PolicyDecision,
} from "../gateway/index.ts";
import type { TenantLedger } from "./ledger.ts";
import type { LimitsVerdict } from "./limits.ts";

export interface TenantBudgetPolicyOptions {
  ledger: TenantLedger;
  /** The tenant's limits as this worker enforces them (cached by the caller). */
  limitsOf(tenant: string): Promise<LimitsVerdict>;
  warn(message: string, err: unknown): void;
  /** How long a call waits for the calls ahead of it to be counted before it is refused as overloaded. */
  admitWaitMs?: number | undefined;
}

/** The refusal code a call over its tenant's budget is recorded with. */
export const TENANT_BUDGET_CODE = "tenant_budget";
/** The refusal code of a call whose tenant's limits do not verify. */
export const TENANT_LIMITS_CODE = "tenant_limits";

const usd = (amount: number): string => `$${amount.toFixed(2)}`;

/** The CLI gives up on a request after 10 minutes by default: a call waits well within that. */
const ADMIT_WAIT_MS = 5 * 60_000;
const FIRST_RECHECK_MS = 50;
const LAST_RECHECK_MS = 1000;
/**
 * Calls of one tenant that may wait on this worker at once; more are refused as overloaded at once. A
 * waiting call asks Redis again every second: a run that opens thousands of requests and hangs up on
 * them must not turn into thousands of scripts a second.
 */
const MAX_WAITING = 32;

/** A wait that does not keep the worker's process alive when it shuts down. */
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());

/** A call's cost waiting to be counted. */
interface Uncounted {
  callId: string;
  costUsd: number;
}

/** What an ended call is counted at (see the file's head). */
export function chargeOf(call: PolicyCall, outcome: ModelCall): number {
  const answered = outcome.status >= 200 && outcome.status < 300 && outcome.answeredBy === undefined;
  const usage = outcome.usage;
  const usageCost = usage === undefined ? 0 : (outcome.costUsd ?? costAtMostUsd(outcome.model, usage));
  if (call.path !== "/v1/messages" || outcome.status < 200 || outcome.status >= 300) return Math.max(0, usageCost);
  const whole = answered && usage !== undefined && Object.values(usage).every((n) => Number.isFinite(n) && n >= 0);
  return whole ? usageCost : Math.max(usageCost, call.worstCaseUsd);
}

const overBudget = (tenant: string, spentUsd: number, budget: number): PolicyDecision => ({
  action: "refuse",
  status: 400,
  type: "invalid_request_error",
  message: `turnstream: tenant ${tenant} spent ${usd(spentUsd)} of its ${usd(budget)} budget for 24 hours; the turn stops here`,
  code: TENANT_BUDGET_CODE,
});

/** Answered as overloaded, which the CLI retries after a while. */
const tryAgain = (message: string): PolicyDecision => ({
  action: "refuse",
  status: 529,
  type: "overloaded_error",
  message,
  retryAfterS: 5,
});

const busy = (tenant: string): PolicyDecision =>
  tryAgain(
    `turnstream gateway: tenant ${tenant}'s calls in flight may spend what is left of its budget; try again shortly`,
  );

export function tenantBudgetPolicy(options: TenantBudgetPolicyOptions): GatewayPolicy {
  return new TenantBudgetPolicy(options);
}

class TenantBudgetPolicy implements GatewayPolicy {
  readonly #ledger: TenantLedger;
  readonly #limitsOf: TenantBudgetPolicyOptions["limitsOf"];
  readonly #warn: TenantBudgetPolicyOptions["warn"];
  readonly #admitWaitMs: number;
  readonly #uncounted = new Map<string, Uncounted[]>();
  /** Calls out now with a hold in the ledger: each is counted when it ends, even at nothing. */
  readonly #holding = new Set<string>();
  readonly #draining = new Map<string, Promise<boolean>>();
  /** Calls of each tenant waiting for room in its budget. */
  readonly #waitingOf = new Map<string, number>();

  constructor(options: TenantBudgetPolicyOptions) {
    this.#ledger = options.ledger;
    this.#limitsOf = options.limitsOf;
    this.#warn = options.warn;
    this.#admitWaitMs = options.admitWaitMs ?? ADMIT_WAIT_MS;
  }

  async beforeRequest(call: PolicyCall): Promise<PolicyDecision> {
    const tenant = call.run.tenant;
    if (tenant === undefined) return { action: "allow" };
    const verdict = await this.#limitsOf(tenant);
    if (!verdict.ok)
      return {
        action: "refuse",
        status: 403,
        type: "permission_error",
        message: verdict.why,
        code: TENANT_LIMITS_CODE,
      };
    if (!(await this.#countWaiting(tenant)))
      return tryAgain("turnstream gateway: the tenant's spend could not be counted; try again shortly");
    const budget = verdict.limits.budgetUsd;
    if (budget === undefined) return { action: "allow" };
    if (call.worstCaseUsd > 0) return this.#admit(tenant, call, budget);
    // A free endpoint (counting tokens, listing models): refused with the rest once the budget is spent.
    const { spentUsd } = await this.#ledger.spent(tenant);
    return spentUsd < budget ? { action: "allow" } : overBudget(tenant, spentUsd, budget);
  }

  afterResponse(call: PolicyCall, outcome: ModelCall): void {
    const tenant = call.run.tenant;
    if (tenant === undefined) return;
    const held = this.#holding.delete(call.callId);
    const costUsd = chargeOf(call, outcome);
    if (costUsd <= 0 && !held) return;
    const waiting = this.#uncounted.get(tenant) ?? [];
    waiting.push({ callId: outcome.callId, costUsd });
    this.#uncounted.set(tenant, waiting);
    // Counted now, in the background; the tenant's next call waits for it either way.
    void this.#countWaiting(tenant);
  }

  /** Counts what waits for the tenant, one drain at a time; false when Redis would not take it. */
  #countWaiting(tenant: string): Promise<boolean> {
    const before = this.#draining.get(tenant) ?? Promise.resolve(true);
    const drained = before.then(() => this.#drain(tenant));
    this.#draining.set(tenant, drained);
    void drained.finally(() => {
      if (this.#draining.get(tenant) === drained) this.#draining.delete(tenant);
    });
    return drained;
  }

  async #drain(tenant: string): Promise<boolean> {
    const waiting = this.#uncounted.get(tenant) ?? [];
    while (waiting.length > 0) {
      try {
        await this.#ledger.spend(tenant, waiting[0]!.callId, waiting[0]!.costUsd);
      } catch (err) {
        this.#warn(`a model call's cost for tenant ${tenant} could not be counted yet`, err);
        return false;
      }
      waiting.shift();
    }
    this.#uncounted.delete(tenant);
    return true;
  }

  /** Waits until the ledger lets the call out with its hold, or says the budget is spent. */
  async #admit(tenant: string, call: PolicyCall, budget: number): Promise<PolicyDecision> {
    const deadline = Date.now() + this.#admitWaitMs;
    let waiting = false;
    try {
      for (let recheckMs = FIRST_RECHECK_MS; ; recheckMs = Math.min(recheckMs * 2, LAST_RECHECK_MS)) {
        const admission = await this.#ledger.admit(tenant, call.callId, call.worstCaseUsd, budget);
        if (admission.status === "over") return overBudget(tenant, admission.spentUsd, budget);
        if (admission.status === "ok") {
          this.#holding.add(call.callId);
          return { action: "allow" };
        }
        if (Date.now() + recheckMs > deadline) return busy(tenant);
        if (!waiting) {
          if ((this.#waitingOf.get(tenant) ?? 0) >= MAX_WAITING) return busy(tenant);
          waiting = true;
          this.#waitingOf.set(tenant, (this.#waitingOf.get(tenant) ?? 0) + 1);
        }
        await sleep(recheckMs);
      }
    } finally {
      if (waiting) this.#stopWaiting(tenant);
    }
  }

  #stopWaiting(tenant: string): void {
    const left = this.#waitingOf.get(tenant)! - 1;
    if (left === 0) this.#waitingOf.delete(tenant);
    else this.#waitingOf.set(tenant, left);
  }
}
