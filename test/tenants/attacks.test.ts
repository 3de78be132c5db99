// Attacks on tenants at the Redis level: names that would collide in keys or pass for another
// tenant, sessions that change tenant, limits replayed, deleted or swapped by someone who holds only
// the operator role, the blocked list, one tenant queuing a hundred thousand turns, and model calls
// made at once or cut short to spend past a budget.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Job } from "bullmq";
import { parseOperatorKeys } from "../../src/decisions/index.ts";
import { requestBound, worstCaseCostUsd, type ModelCall, type PolicyCall } from "../../src/gateway/index.ts";
import { createProducer, InvalidTurnError, orderKeys } from "../../src/queue/index.ts";
import {
  chargeOf,
  clearLimits,
  fairShareKey,
  fairSharePriority,
  signTenantLimits,
  TenantLedger,
  tenantKeys,
  TenantLimitsReader,
  tenantLimitsKey,
  tenantLimitsNewestKey,
  tenantRows,
  writeLimits,
  type LimitsCheck,
  type TenantLimitsInput,
} from "../../src/tenants/index.ts";
import { operatorKey } from "../decisions/_support.ts";
import { startAclRedis } from "../decisions/_acl-redis.ts";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";

test("tenant names that would break out of their key tag, pass for the untenanted field, look like another or hold a secret are refused at enqueue, writing nothing", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const cwd = space.workspace();
  const hostile = [
    "a}b",
    "{t:x}",
    "x:running",
    "acme}:spend",
    "-",
    "",
    " acme",
    "acme\n",
    "\u0430cme", // Cyrillic а: looks like "acme"
    "acme\u200b", // a zero-width space after it
    "ACME\u0301",
    `sk-ant-api03-${"A".repeat(40)}`,
    `ghp_${"a".repeat(36)}`,
    "AKIAABCDEFGHIJKLMNOP",
    "x".repeat(101),
  ];
  try {
    for (const tenant of hostile) {
      const session = `s-name-${hostile.indexOf(tenant)}`;
      await assert.rejects(
        producer.enqueueTurn({ prompt: "p", cwd, tenant, session }),
        (err: Error) => err instanceof InvalidTurnError && err.field === "tenant",
        JSON.stringify(tenant),
      );
      assert.equal(await redis.exists(orderKeys(space.logPrefix, session).conf), 0, "nothing was written");
    }
    assert.equal(await producer.queue.count(), 0);
    const vt = await redis.hgetall(fairShareKey(space.queuePrefix, producer.queue.name));
    assert.deepEqual(vt, {}, "no fair-share field was made for a refused name");
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("a session keeps the tenant its first turn named: another tenant's turn is refused, and a session that began without one never takes one", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const cwd = space.workspace();
  try {
    await producer.enqueueTurn({ prompt: "a", cwd, tenant: "team-a", session: "s-a" });
    await assert.rejects(producer.enqueueTurn({ prompt: "b", cwd, tenant: "team-b", session: "s-a" }), /team-a/);
    // Naming none runs as the session's tenant, so a budget cannot be dodged by leaving it out.
    const unnamed = await producer.enqueueTurn({ prompt: "c", cwd, session: "s-a" });
    assert.equal((await Job.fromId(producer.queue, unnamed.turn))!.data.tenant, "team-a");

    await producer.enqueueTurn({ prompt: "d", cwd, session: "s-free" });
    await assert.rejects(
      producer.enqueueTurn({ prompt: "e", cwd, tenant: "team-a", session: "s-free" }),
      /belongs to no tenant/,
    );
    assert.equal(await redis.hget(orderKeys(space.logPrefix, "s-free").conf, "tenant"), null);
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("limits with only the operator role: an older signed record replayed, the record deleted, or another tenant's record copied over all hold the tenant back; only a newer signed record counts", async () => {
  const space = testSpace();
  const acl = await startAclRedis(space);
  const worker = acl.client("worker");
  const attacker = acl.client("operator");
  const keyring = parseOperatorKeys([operatorKey.publicKey]);
  const defaults = { overBudget: "wait" as const };
  // A fresh reader each time, with no cache: what a newly started worker would see.
  const limitsOf = (tenant: string) =>
    new TenantLimitsReader({ redis: worker, logPrefix: space.logPrefix, keyring, defaults, ttlMs: 0 }).limitsOf(tenant);
  // What an operator's overview (read-only, as `turnstream tenants` reads) shows of the tenant.
  const shown = async (tenant: string): Promise<{ limits: LimitsCheck; problem: string | null }> => {
    const options = { redis: acl.client("reader"), logPrefix: space.logPrefix, keyring, show: String, only: [tenant] };
    const [row] = await tenantRows(options);
    return { limits: row!.limits, problem: row!.problem };
  };
  let clock = Date.now() - 60_000;
  const signed = (limits: Omit<TenantLimitsInput, "by" | "at">) =>
    signTenantLimits(operatorKey, { ...limits, by: "ops", at: new Date((clock += 1000)).toISOString() });
  const limitsKey = tenantLimitsKey(space.logPrefix);
  try {
    // The operator first gave acme a generous budget, then cut it.
    const generous = signed({ tenant: "acme", budgetUsd: 500, overBudget: "wait" });
    await writeLimits(attacker, space.logPrefix, generous);
    const before = await limitsOf("acme");
    assert.equal(before.ok && before.limits.budgetUsd, 500);
    const cut = signed({ tenant: "acme", budgetUsd: 1, maxRunning: 1, overBudget: "fail" });
    await writeLimits(attacker, space.logPrefix, cut);
    const now = await limitsOf("acme");
    assert.deepEqual(now.ok && now.limits, { budgetUsd: 1, maxRunning: 1, overBudget: "fail" });
    assert.deepEqual(await shown("acme"), { limits: "verified", problem: null });

    // Replaying the older, generous record: it verifies, but it is older than one a worker has seen.
    await attacker.hset(limitsKey, "acme", JSON.stringify(generous));
    const replayed = await limitsOf("acme");
    assert.equal(replayed.ok, false, `a rolled-back record counted: ${JSON.stringify(replayed)}`);
    assert.match(!replayed.ok ? replayed.why : "", /older/);
    assert.deepEqual(await shown("acme"), { limits: "fails", problem: !replayed.ok ? replayed.why : "" });

    // Deleting the record to fall back to the worker's defaults (here: no limits at all).
    await attacker.hdel(limitsKey, "acme");
    const deleted = await limitsOf("acme");
    assert.equal(deleted.ok, false, `a deleted record fell back to the defaults: ${JSON.stringify(deleted)}`);
    assert.match(!deleted.ok ? deleted.why : "", /removed/);
    assert.deepEqual(await shown("acme"), { limits: "fails", problem: !deleted.ok ? deleted.why : "" });

    // Copying a generous tenant's record over acme's.
    const rich = signed({ tenant: "rich", budgetUsd: 10_000, overBudget: "wait" });
    await writeLimits(attacker, space.logPrefix, rich);
    await attacker.hset(limitsKey, "acme", JSON.stringify(rich));
    assert.equal((await limitsOf("acme")).ok, false);

    // What the workers remember is beyond the operator role's reach.
    const newestKey = tenantLimitsNewestKey(space.logPrefix);
    assert.ok(await worker.exists(newestKey));
    await assert.rejects(attacker.hdel(newestKey, "acme"), /NOPERM/);
    await assert.rejects(attacker.del(newestKey), /NOPERM/);

    // The operator's own way out: newer signed limits, or a signed clear back to the defaults.
    await writeLimits(attacker, space.logPrefix, signed({ tenant: "acme", budgetUsd: 2, overBudget: "fail" }));
    const raised = await limitsOf("acme");
    assert.deepEqual(raised.ok && raised.limits.budgetUsd, 2);
    await clearLimits(attacker, space.logPrefix, operatorKey, {
      tenant: "acme",
      by: "ops",
      at: new Date((clock += 1000)).toISOString(),
    });
    const cleared = await limitsOf("acme");
    assert.deepEqual(cleared.ok && { signed: cleared.signed, limits: cleared.limits }, {
      signed: true,
      limits: defaults,
    });
    assert.deepEqual(await shown("acme"), { limits: "none", problem: null }, "a signed clear is the newest record");
    // ...and that clear cannot be undone by replaying the budget it replaced.
    await attacker.hset(limitsKey, "acme", JSON.stringify(cut));
    assert.equal((await limitsOf("acme")).ok, false);
    assert.equal((await shown("acme")).limits, "fails");
    // Newer limits count in the overview before any worker has read them.
    await writeLimits(attacker, space.logPrefix, signed({ tenant: "acme", budgetUsd: 3, overBudget: "fail" }));
    assert.deepEqual(await shown("acme"), { limits: "verified", problem: null });

    // A tenant never given limits still gets the defaults.
    assert.deepEqual(await limitsOf("newcomer"), { ok: true, signed: false, limits: defaults });
  } finally {
    await acl.close();
  }
});

test("the blocked list: a job that got its slot leaves it, so a release wakes one that still waits, and the list does not grow with every job that ever waited", async () => {
  const space = testSpace();
  const redis = redisFor();
  const ledger = new TenantLedger(redis, space.logPrefix);
  const limits = { maxRunning: 1, overBudget: "wait" as const };
  const { running, blocked } = tenantKeys(space.logPrefix, "solo");
  try {
    let holder = "w.0";
    assert.equal((await ledger.reserve("solo", holder, 60_000, limits, "job-0")).status, "ok");
    // Three hundred turns find the tenant at its limit; each gets its slot on its own back-off once
    // the holder's slot lapsed (its worker died: no release popped the waiting job).
    for (let index = 1; index <= 300; index++) {
      const job = `job-${index}`;
      assert.equal((await ledger.reserve("solo", `w.${index}`, 60_000, limits, job)).status, "at_limit");
      await ledger.block("solo", job);
      await redis.zrem(running, holder); // the holder's slot lapses
      holder = `w.${index}`;
      assert.equal((await ledger.reserve("solo", holder, 60_000, limits, job)).status, "ok");
    }
    const kept = await redis.llen(blocked);
    assert.equal(kept, 0, `the blocked list kept ${kept} ids of jobs that run or ran`);
    // One more waits now: the next release wakes it, not a job that ran long ago.
    assert.equal((await ledger.reserve("solo", "w.late", 60_000, limits, "job-late")).status, "at_limit");
    await ledger.block("solo", "job-late");
    assert.notEqual(await redis.pttl(blocked), -1, "the blocked list expires");
    assert.equal(await ledger.release("solo", holder), "job-late");
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("fair share: one tenant queuing 100,000 turns stays within BullMQ's priorities and another tenant's next turn is still taken next", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const queue = producer.queue;
  const priority = (tenant: string | undefined) => fairSharePriority(redis, queue, space.queuePrefix, tenant);
  const cwd = space.workspace();
  try {
    // A real turn holds the queue's head, so positions are not started over between the calls.
    const first = await producer.enqueueTurn({ prompt: "first", cwd, tenant: "hog" });
    const hog: number[] = [];
    for (let batch = 0; batch < 100; batch++)
      hog.push(...(await Promise.all(Array.from({ length: 1000 }, () => priority("hog")))));
    assert.equal(hog.length, 100_000);
    assert.ok(
      hog.every((position, index) => index === 0 || position === hog[index - 1]! + 1),
      "consecutive positions",
    );
    assert.ok(hog.at(-1)! < 2 ** 21);
    const small = await producer.enqueueTurn({ prompt: "small", cwd, tenant: "small" });
    const none = await producer.enqueueTurn({ prompt: "none", cwd });
    const hogNext = await producer.enqueueTurn({ prompt: "hog again", cwd, tenant: "hog" });
    const queued = (await queue.getJobs(["prioritized"], 0, -1, true)).map((job) => String(job.id));
    assert.deepEqual(queued, [first.turn, small.turn, none.turn, hogNext.turn]);

    // Past BullMQ's limit a position stays at it: enqueueing never fails, those turns go in order queued.
    await redis.hset(fairShareKey(space.queuePrefix, queue.name), "hog", 2 ** 21 - 2);
    const atLimit = [await priority("hog"), await priority("hog")];
    assert.deepEqual(atLimit, [2 ** 21 - 1, 2 ** 21 - 1]);
    await producer.enqueueTurn({ prompt: "hog at the limit", cwd, tenant: "hog" });
    assert.equal(await priority("newcomer"), 1, "a new tenant still starts next to the head");
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

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
