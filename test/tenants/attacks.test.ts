// Attacks on tenants' budgets at the Redis level: model calls made at once, or cut short, to spend
// past a budget.
import { test } from "node:test";
import assert from "node:assert/strict";
import { requestBound, worstCaseCostUsd, type ModelCall, type PolicyCall } from "../../src/gateway/index.ts";
import { chargeOf, TenantLedger, tenantKeys } from "../../src/tenants/index.ts";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";

test("calls out at once: each holds the most it can cost; beside others a call goes out only if every hold fits, alone it may overshoot by its own cost; a hold whose worker died counts in full", async () => {
  const space = testSpace();
  const redis = redisFor();
  const ledger = new TenantLedger(redis, space.logPrefix);
  const status = async (tenant: string, call: string, hold: number, budget: number) =>
    (await ledger.admit(tenant, call, hold, budget)).status;
  try {
    assert.equal(await status("t", "c1", 0.5, 1), "ok");
    assert.equal(await status("t", "c2", 0.4, 1), "ok");
    assert.equal(await status("t", "c3", 0.2, 1), "wait", "0.5 + 0.4 held: 0.2 more does not fit");
    await ledger.spend("t", "c1", 0.1); // c1 cost less than it held: its hold goes, its cost stays
    assert.equal(await status("t", "c3", 0.2, 1), "ok");
    await ledger.spend("t", "c2", 0.9);
    await ledger.spend("t", "c3", 0);
    assert.equal(await status("t", "c4", 0.01, 1), "over");
    assert.equal((await ledger.spent("t")).spentUsd, 1);

    // Alone, a call whose hold is more than the whole budget goes out; nothing may go out beside it.
    assert.equal(await status("u", "d1", 5, 1), "ok");
    assert.equal(await status("u", "d2", 0.01, 1), "wait");
    // d1's worker died mid-call: once its hold lapses it is counted at the most it could have cost.
    const { holds } = tenantKeys(space.logPrefix, "u");
    await redis.hset(holds, "d1", "5000000:1");
    assert.equal(await status("u", "d2", 0.01, 1), "over");
    assert.equal((await ledger.spent("u")).spentUsd, 5);
    assert.equal(await ledger.spend("u", "d1", 0.3), false, "a lapsed hold's call is not counted again");
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("what a call is charged: its usage when its answer ended whole; its worst case when it was cut, or came without usage; an unknown model at the dearest price; free endpoints nothing", () => {
  const body = (fields: Record<string, unknown>) => {
    const text = JSON.stringify({ model: "claude-sonnet-4-5", messages: [{ role: "user", content: "hi" }], ...fields });
    return requestBound(Buffer.byteLength(text), JSON.parse(text));
  };
  const plain = body({ max_tokens: 1000 });
  const small = Buffer.byteLength(
    JSON.stringify({ model: "claude-sonnet-4-5", messages: [{ role: "user", content: "hi" }], max_tokens: 1000 }),
  );
  assert.deepEqual(plain, { inputTokens: small + 4096, outputTokens: 1000 });
  // Media count at the most they can be, wherever they are (here inside a tool result); server tools too.
  const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } };
  const withMedia = body({
    max_tokens: 1000,
    messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "x", content: [image, image] }] }],
    tools: [
      { type: "web_search_20250305", name: "web_search" },
      { name: "Bash", input_schema: {} },
    ],
  });
  assert.ok(withMedia.inputTokens >= 2 * 5000 + 200_000);
  assert.deepEqual(requestBound(10, undefined), { inputTokens: 1_004_096, outputTokens: 128_000 });
  assert.equal(body({}).outputTokens, 128_000, "no max_tokens: the most any model gives");

  const call = (path: string, worstCaseUsd: number): PolicyCall => ({
    callId: "c",
    run: { session: "s", tenant: "t" },
    model: "claude-sonnet-4-5",
    path,
    worstCaseUsd,
    credentialFingerprint: "f",
  });
  const usage = { input_tokens: 1000, output_tokens: 100, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const outcome = (fields: Partial<ModelCall>): ModelCall => ({
    callId: "c",
    startedAt: "",
    method: "POST",
    path: "/v1/messages",
    model: "claude-sonnet-4-5",
    stream: true,
    status: 200,
    durationMs: 1,
    credential: "f",
    usage,
    costUsd: 0.0045,
    ...fields,
  });
  const worst = worstCaseCostUsd("claude-sonnet-4-5", plain);
  const messages = call("/v1/messages", worst);
  assert.equal(chargeOf(messages, outcome({})), 0.0045);
  assert.equal(chargeOf(messages, outcome({ answeredBy: "aborted" })), worst);
  assert.equal(chargeOf(messages, outcome({ answeredBy: "too_large" })), worst);
  assert.equal(chargeOf(messages, outcome({ usage: undefined, costUsd: undefined })), worst);
  assert.equal(chargeOf(messages, outcome({ usage: { ...usage, output_tokens: -5000 } })), worst);
  const unknown = outcome({ model: "x-unpriced", costUsd: undefined });
  assert.ok(Math.abs(chargeOf(messages, unknown) - (1000 * 15 + 100 * 75) / 1e6) < 1e-12);
  assert.equal(chargeOf(messages, outcome({ status: 529, usage: undefined, costUsd: undefined })), 0);
  assert.equal(
    chargeOf(
      call("/v1/messages/count_tokens", 0),
      outcome({ path: "/v1/messages/count_tokens", usage: undefined, costUsd: undefined }),
    ),
    0,
  );
});
