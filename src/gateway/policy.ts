// The one door for fleet rules: every request passes beforeRequest before it leaves the worker, the
// upstream's answer is shown to onUpstreamAnswer as soon as its headers arrive, and every outcome is
// shown to afterResponse. A fleet-wide cooldown after a 429 (cooldown.ts) or a tenant's budget plugs
// in here without touching the runner; composePolicies puts several behind the one door.
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
  /**
   * Aborts when the client hangs up before its answer is done: a policy that holds a request
   * (beforeRequest awaiting) stops holding it then.
   */
  signal?: AbortSignal | undefined;
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

/** What the upstream answered, known when its headers arrive (a streamed body may then run for minutes). */
export interface UpstreamAnswer {
  status: number;
  /** The answer's `retry-after-ms` or `retry-after` (seconds or an HTTP date), in ms; undefined when it names none. */
  retryAfterMs: number | undefined;
}

/**
 * The gateway passes the same PolicyCall object to every hook of one request, so a policy can key
 * what it reserved in beforeRequest (a probe, a budget) on it and settle it later.
 */
export interface GatewayPolicy {
  /** May await (hold the request); a client that hangs up meanwhile aborts `call.signal`. */
  beforeRequest(call: PolicyCall): Promise<PolicyDecision> | PolicyDecision;
  /** The upstream's status, for requests that reached it, before its body streams. Must not throw. */
  onUpstreamAnswer?(call: PolicyCall, answer: UpstreamAnswer): void;
  /** Sees each call once it ended (refused ones too). Must not throw; what it throws is logged. */
  afterResponse?(call: PolicyCall, outcome: ModelCall): void;
}

export const allowAll: GatewayPolicy = { beforeRequest: () => ({ action: "allow" }) };

/**
 * Several policies behind one door. beforeRequest asks them in order and stops at the first refusal
 * (later ones are not asked: a refused request reserves nothing). Delays do not add up: each says
 * "not before this long from now", and the request waits the longest of them. So a policy that holds
 * the request inside beforeRequest (the cooldown) belongs last, where the send follows its allow at
 * once. onUpstreamAnswer and afterResponse go to every policy, whichever were asked, and one that
 * throws does not keep the others from seeing the call (the errors are thrown together afterwards,
 * for the gateway to log).
 */
export function composePolicies(...policies: readonly GatewayPolicy[]): GatewayPolicy {
  if (policies.length === 1) return policies[0]!;
  return {
    async beforeRequest(call) {
      let delayMs = 0;
      for (const policy of policies) {
        const decision = await policy.beforeRequest(call);
        if (decision.action === "refuse") return decision;
        if (decision.action === "delay") delayMs = Math.max(delayMs, decision.ms);
      }
      return delayMs > 0 ? { action: "delay", ms: delayMs } : { action: "allow" };
    },
    onUpstreamAnswer: (call, answer) => toEach(policies, (policy) => policy.onUpstreamAnswer?.(call, answer)),
    afterResponse: (call, outcome) => toEach(policies, (policy) => policy.afterResponse?.(call, outcome)),
  };
}

function toEach(policies: readonly GatewayPolicy[], tell: (policy: GatewayPolicy) => void): void {
  const errors: unknown[] = [];
  for (const policy of policies) {
    try {
      tell(policy);
    } catch (err) {
      errors.push(err);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, errors.map((e) => (e as Error)?.message).join("; "));
}
