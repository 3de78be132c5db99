// composePolicies without a gateway: asked in order, the first refusal wins and later policies are not
// asked, the longest delay wins, every policy sees every answer and outcome though one throws.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  composePolicies,
  type GatewayPolicy,
  type ModelCall,
  type PolicyCall,
  type PolicyDecision,
} from "../../src/gateway/index.ts";

const call: PolicyCall = {
  callId: "call-1",
  worstCaseUsd: 0,
  run: { session: "s" },
  model: undefined,
  path: "/v1/messages",
  credentialFingerprint: "0123456789abcdef",
};

const outcome = { status: 200, credential: "0123456789abcdef" } as ModelCall;

/** A policy that answers `decision` and writes what it was asked into `seen`. */
function scripted(name: string, decision: PolicyDecision, seen: string[], fail = false): GatewayPolicy {
  return {
    beforeRequest: () => (seen.push(`${name}.before`), decision),
    onUpstreamAnswer: (_call, answer) => {
      seen.push(`${name}.answer ${answer.status}`);
      if (fail) throw new Error(`${name} failed`);
    },
    afterResponse: (_call, ended) => {
      seen.push(`${name}.after ${ended.status}`);
      if (fail) throw new Error(`${name} failed`);
    },
  };
}

test("composed: asked in order, the first refusal wins and later policies are not asked", async () => {
  const seen: string[] = [];
  const refusal: PolicyDecision = { action: "refuse", status: 403, type: "permission_error", message: "budget" };
  const policy = composePolicies(
    scripted("a", { action: "delay", ms: 50 }, seen),
    scripted("b", refusal, seen),
    scripted("c", { action: "allow" }, seen),
  );
  assert.deepEqual(await policy.beforeRequest(call), refusal);
  assert.deepEqual(seen, ["a.before", "b.before"]);
});

test("composed: delays do not add up, the longest wins; all allow is allow", async () => {
  const seen: string[] = [];
  const delays = composePolicies(
    scripted("a", { action: "delay", ms: 300 }, seen),
    scripted("b", { action: "allow" }, seen),
    scripted("c", { action: "delay", ms: 200 }, seen),
  );
  assert.deepEqual(await delays.beforeRequest(call), { action: "delay", ms: 300 });
  const allows = composePolicies(scripted("a", { action: "allow" }, seen), scripted("b", { action: "allow" }, seen));
  assert.deepEqual(await allows.beforeRequest(call), { action: "allow" });
});

test("composed: every policy sees every answer and outcome though one throws; the errors come out after", () => {
  const seen: string[] = [];
  const policy = composePolicies(
    scripted("a", { action: "allow" }, seen, true),
    scripted("b", { action: "allow" }, seen),
    { beforeRequest: () => ({ action: "allow" }) },
    scripted("c", { action: "allow" }, seen, true),
  );
  assert.throws(() => policy.onUpstreamAnswer!(call, { status: 429, retryAfterMs: 1000 }), AggregateError);
  assert.throws(() => policy.afterResponse!(call, outcome), /a failed; c failed/);
  assert.deepEqual(seen, ["a.answer 429", "b.answer 429", "c.answer 429", "a.after 200", "b.after 200", "c.after 200"]);
});
