// The one door for fleet rules: every request passes beforeRequest before it leaves the worker, and
// every outcome is shown to afterResponse. A fleet-wide cooldown after a 429 or a tenant's budget
// plugs in here without touching the runner.
import type { RunBinding } from "./grants.ts";
import type { ModelCall } from "./calls.ts";

export interface PolicyCall {
  /** The gateway's own id of the call, the same as its ModelCall's. */
  callId: string;
  run: RunBinding;
  /** The request's model, when its body names one. */
  model: string | undefined;
  /** `/v1/messages`, `/v1/messages/count_tokens`, … */
  path: string;
  /**
   * The most the call can cost in USD, from its body (its bytes, its media, its max_tokens) at its
   * model's price or the dearest known; 0 for the free endpoints.
   */
  worstCaseUsd: number;
  /** Names the credential the call would use, never holding it. */
  credentialFingerprint: string;
}

export type PolicyDecision =
  | { action: "allow" }
  /** Answered by the gateway with an Anthropic-shaped error (`type`: `rate_limit_error`, `permission_error`, …). */
  | {
      action: "refuse";
      status: number;
      type: string;
      message: string;
      retryAfterS?: number;
      /** A name for why (`tenant_budget`): recorded with the call, so the turn can end with its own error kind. */
      code?: string;
    }
  /** Held this long, then sent (a client that hangs up meanwhile ends it). */
  | { action: "delay"; ms: number };

export interface GatewayPolicy {
  beforeRequest(call: PolicyCall): Promise<PolicyDecision> | PolicyDecision;
  /** Sees each call once it ended (refused ones too). Must not throw; what it throws is logged. */
  afterResponse?(call: PolicyCall, outcome: ModelCall): void;
}

export const allowAll: GatewayPolicy = { beforeRequest: () => ({ action: "allow" }) };

/**
 * Several policies as one: each is asked in order and the first refusal answers; delays add up (each
 * policy's wait is its own). Every policy sees every outcome; one that throws does not stop the rest.
 */
export function composePolicies(...policies: readonly GatewayPolicy[]): GatewayPolicy {
  if (policies.length === 1) return policies[0]!;
  return {
    async beforeRequest(call) {
      let delayMs = 0;
      for (const policy of policies) {
        const decision = await policy.beforeRequest(call);
        if (decision.action === "refuse") return decision;
        if (decision.action === "delay") delayMs += decision.ms;
      }
      return delayMs > 0 ? { action: "delay", ms: delayMs } : { action: "allow" };
    },
    afterResponse(call, outcome) {
      const errors: unknown[] = [];
      for (const policy of policies) {
        try {
          policy.afterResponse?.(call, outcome);
        } catch (err) {
          errors.push(err);
        }
      }
      if (errors.length > 0) throw errors[0];
    },
  };
}
