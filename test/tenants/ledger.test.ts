// Tenants' shared ledger against a real Redis: running slots that lapse with their lease, the
// 24-hour budget in buckets with each call counted once, signed limits that fail closed, and the
// fair-share priorities a producer queues with.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Job } from "bullmq";
import { parseOperatorKeys } from "../../src/decisions/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import {
  clearLimits,
  limitsFromRecord,
  readLimitsRecord,
  signTenantLimits,
  TenantLedger,
  writeLimits,
} from "../../src/tenants/index.ts";
import { operatorKey, stranger } from "../decisions/_support.ts";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

test("running slots: the limit holds across holders, a slot lapses with its lease unless renewed, a release wakes the oldest blocked job", async () => {
  const space = testSpace();
  const redis = redisFor();
  const ledger = new TenantLedger(redis, space.logPrefix);
  const limits = { maxRunning: 2, overBudget: "wait" as const };
  try {
    assert.equal((await ledger.reserve("acme/api", "w1.a", 400, limits)).status, "ok");
    assert.equal((await ledger.reserve("acme/api", "w2.b", 400, limits)).status, "ok");
    const third = await ledger.reserve("acme/api", "w3.c", 400, limits);
    assert.deepEqual({ status: third.status, running: third.running }, { status: "at_limit", running: 2 });
    // Another tenant has slots of its own.
    assert.equal((await ledger.reserve("other", "w3.c", 400, limits)).status, "ok");
    // Reserving again with the same token is a renewal, not a second slot.
    assert.equal((await ledger.reserve("acme/api", "w1.a", 400, limits)).running, 2);

    await ledger.block("acme/api", "job-1");
    await ledger.block("acme/api", "job-2");
    assert.equal(await ledger.release("acme/api", "w1.a"), "job-1");
    assert.equal(await ledger.running("acme/api"), 1);

    // w2.b's holder crashed: nobody renews it, and its slot lapses with the lease.
    await ledger.reserve("acme/api", "w4.d", 400, limits);
    for (let renewal = 0; renewal < 4; renewal++) {
      await sleep(150);
      assert.equal(await ledger.renew("acme/api", "w4.d", 400), true);
    }
    assert.equal(await ledger.running("acme/api"), 1, "the crashed holder's slot lapsed, the renewed one did not");
    assert.equal(await ledger.renew("acme/api", "w2.b", 400), false, "a lapsed slot is not taken again by renewing");
    assert.equal((await ledger.reserve("acme/api", "w5.e", 400, limits)).status, "ok");
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("budget: spend counts once per call id, in rolling buckets; over budget is refused until the oldest bucket ages out", async () => {
  const space = testSpace();
  const redis = redisFor();
  const ledger = new TenantLedger(redis, space.logPrefix, { windowMs: 1200, bucketMs: 400 });
  const limits = { budgetUsd: 0.01, overBudget: "wait" as const };
  try {
    assert.equal(await ledger.spend("t1", "call-1", 0.004), true);
    assert.equal(await ledger.spend("t1", "call-1", 0.004), false, "the same call is not counted twice");
    assert.equal(await ledger.spend("t1", "call-2", 0.0061), true);
    const { spentUsd, freesAt } = await ledger.spent("t1");
    assert.ok(Math.abs(spentUsd - 0.0101) < 1e-9, `spent ${spentUsd}`);
    const over = await ledger.reserve("t1", "w.a", 5000, limits);
    assert.equal(over.status, "over_budget");
    assert.ok(over.status === "over_budget" && Math.abs(over.freesAt - freesAt!) < 1, "the reserve and the read agree");
    // Past the window and the oldest bucket, the spend has aged out.
    await sleep(Math.max(0, freesAt! - Date.now()) + 50);
    assert.equal((await ledger.spent("t1")).spentUsd, 0);
    assert.equal((await ledger.reserve("t1", "w.a", 5000, limits)).status, "ok");
    // A cost is rounded up to the micro-USD: rounding never frees budget.
    await ledger.spend("t2", "c", 0.0000001);
    assert.equal((await ledger.spent("t2")).spentUsd, 0.000001);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("limits count only when signed by a trusted operator key; a forged or unverifiable record holds the tenant back", async () => {
  const space = testSpace();
  const redis = redisFor();
  const keyring = parseOperatorKeys([operatorKey.publicKey]);
  const input = {
    tenant: "acme/api",
    budgetUsd: 5,
    maxRunning: 3,
    overBudget: "fail" as const,
    by: "ops",
    at: new Date().toISOString(),
  };
  try {
    await writeLimits(redis, space.logPrefix, signTenantLimits(operatorKey, input));
    const raw = await readLimitsRecord(redis, space.logPrefix, "acme/api");
    const verified = limitsFromRecord("acme/api", raw, keyring);
    assert.deepEqual(verified, {
      ok: true,
      signed: true,
      limits: { budgetUsd: 5, maxRunning: 3, overBudget: "fail" },
      version: { atMs: Date.parse(input.at), signature: (JSON.parse(raw!) as { signature: string }).signature },
    });
    // Someone who can write Redis raises the budget: the signature no longer matches.
    const raised = JSON.stringify({ ...JSON.parse(raw!), budgetUsd: 5000 });
    const forged = limitsFromRecord("acme/api", raised, keyring);
    assert.equal(forged.ok, false);
    assert.match(!forged.ok ? forged.why : "", /signature/);
    // Signed by a key the worker does not trust, or moved to another tenant.
    const strangers = JSON.stringify(signTenantLimits(stranger, input));
    assert.equal(limitsFromRecord("acme/api", strangers, keyring).ok, false);
    assert.equal(limitsFromRecord("acme/web", raw, keyring).ok, false);
    // A worker without operator keys cannot check a record: it does not run the tenant's turns unchecked.
    assert.match(JSON.stringify(limitsFromRecord("acme/api", raw, undefined)), /TURNSTREAM_OPERATOR_KEYS/);
    // No record: the worker's defaults.
    const defaults = { budgetUsd: 1, overBudget: "wait" as const };
    assert.deepEqual(limitsFromRecord("new", null, keyring, defaults), { ok: true, signed: false, limits: defaults });
    // A signed clear puts the tenant back on the defaults (a deleted record would not: see attacks.test.ts).
    await clearLimits(redis, space.logPrefix, operatorKey, {
      tenant: "acme/api",
      by: "ops",
      at: new Date().toISOString(),
    });
    const cleared = limitsFromRecord(
      "acme/api",
      await readLimitsRecord(redis, space.logPrefix, "acme/api"),
      keyring,
      defaults,
    );
    assert.deepEqual(cleared.ok && { signed: cleared.signed, limits: cleared.limits }, {
      signed: true,
      limits: defaults,
    });
    // Its signature covers the clear: one that names limits, or whose clear was taken off, does not verify.
    const clearedRecord = JSON.parse((await readLimitsRecord(redis, space.logPrefix, "acme/api"))!) as Record<
      string,
      unknown
    >;
    assert.equal(limitsFromRecord("acme/api", JSON.stringify({ ...clearedRecord, budgetUsd: 9 }), keyring).ok, false);
    assert.equal(
      limitsFromRecord("acme/api", JSON.stringify({ ...clearedRecord, cleared: undefined }), keyring).ok,
      false,
    );
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("fair share: a tenant that queues behind another's many turns is taken next, each tenant's own turns in order", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const cwd = space.workspace();
  try {
    const enqueue = (tenant: string | undefined, index: number) =>
      producer.enqueueTurn({ prompt: `p${index}`, cwd, ...(tenant === undefined ? {} : { tenant }) });
    const teamA: string[] = [];
    for (let index = 0; index < 8; index++) teamA.push((await enqueue("team-a", index)).turn);
    const teamB: string[] = [];
    for (let index = 0; index < 3; index++) teamB.push((await enqueue("team-b", index)).turn);
    const none = (await enqueue(undefined, 0)).turn;
    // The order BullMQ takes them in: lowest priority first, equal ones in the order queued.
    const queued = await producer.queue.getJobs(["prioritized"], 0, -1, true);
    const order = queued.map((job) => String(job.id));
    assert.deepEqual(order.slice(0, 7), [teamA[0], teamB[0], none, teamA[1], teamB[1], teamA[2], teamB[2]]);
    assert.deepEqual(
      order.filter((id) => teamA.includes(id)),
      teamA,
      "a tenant's own turns keep their order",
    );
    // A session keeps the tenant its first turn named; a later turn naming another is refused.
    const first = await producer.enqueueTurn({ prompt: "x", cwd, tenant: "team-a", session: "s-owned" });
    const later = await producer.enqueueTurn({ prompt: "y", cwd, session: "s-owned" });
    assert.equal((await Job.fromId(producer.queue, later.turn))!.data.tenant, "team-a");
    await assert.rejects(
      producer.enqueueTurn({ prompt: "z", cwd, tenant: "team-b", session: "s-owned" }),
      (err: Error) => /belongs to tenant team-a/.test(err.message),
    );
    assert.ok(first.created);
    await assert.rejects(producer.enqueueTurn({ prompt: "z", cwd, tenant: "bad tenant!" }), (err: Error) =>
      /tenant/.test(err.message),
    );
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});
