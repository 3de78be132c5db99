// Tenants' budgets and running limits with the real CLI behind the worker's gateway: a turn of a
// tenant that runs out of budget stops at its next model call and fails with its own kind; what the
// ledger counted equals what the log's model calls cost and what the CLI itself says it spent; a
// tenant over budget fails (or waits) before starting; forged limits hold the tenant back; and a
// tenant at its running limit runs one turn at a time, the next woken when a slot frees.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EXIT } from "../../src/events/index.ts";
import { parseOperatorKeys } from "../../src/decisions/index.ts";
import { signTenantLimits, TenantLedger, writeLimits, type TenantLimitsInput } from "../../src/tenants/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { operatorKey } from "../decisions/_support.ts";
import { turnstream } from "../bin/_cli.ts";
import { cliLines, dataOf, rig, type Rig } from "./_more.ts";

const OPERATOR_KEYS = [operatorKey.publicKey];
parseOperatorKeys(OPERATOR_KEYS);

const echo = (text: string) => ({
  content: [{ type: "tool_use", name: "Bash", input: { command: `echo ${text}`, description: "echo" } }],
  usage: { input_tokens: 1000, output_tokens: 100 },
});

async function setLimits(stage: Rig, limits: Omit<TenantLimitsInput, "by" | "at">): Promise<void> {
  const signed = signTenantLimits(operatorKey, { ...limits, by: "ops", at: new Date().toISOString() });
  await writeLimits(stage.redis, stage.space.logPrefix, signed);
}

const modelCalls = (events: Envelope[]) => events.filter((e) => e.kind === "model.call").map(dataOf);
const failedOf = (events: Envelope[]) => dataOf(events.find((e) => e.kind === "turn.failed")!);

test("a tenant's budget: the CLI stops at what the tenant had left, the gateway refuses the call past it, each call counted once against the log and the CLI's own figure; then turns fail before starting; forged limits hold the tenant back", async () => {
  const sleepy = {
    content: [{ type: "tool_use", name: "Bash", input: { command: "sleep 2", description: "wait" } }],
    usage: { input_tokens: 1000, output_tokens: 100 },
  };
  // The first turn's CLI stops after two calls ($0.012 of $0.01); the second turn sleeps in its tool.
  const stage = await rig({ responses: [echo("one"), echo("two"), sleepy, echo("four"), echo("five")] });
  const ledger = new TenantLedger(stage.redis, stage.space.logPrefix);
  try {
    // Three calls of 1000 + 100 tokens spend more than $0.01 at any model's price.
    await setLimits(stage, { tenant: "acme/api", budgetUsd: 0.01, overBudget: "fail" });
    stage.worker({ operatorKeys: OPERATOR_KEYS, toolSandbox: { mode: "off" } });
    const first = await stage.producer.enqueueTurn({ prompt: "echo", cwd: stage.ws, tenant: "acme/api" });
    const firstResult = await stage.producer.waitForTurn(first.turn, { timeoutMs: 90_000 });
    assert.equal(firstResult.errorKind, "tenant_budget", JSON.stringify(firstResult));
    const firstEvents = await stage.events(first.session, first.turn);
    // Its own budget was capped at what the tenant had left, and the CLI stopped there by itself.
    assert.equal(dataOf(firstEvents.find((e) => e.kind === "attempt.started")!)["maxBudgetUsd"], 0.01);
    const firstCalls = modelCalls(firstEvents);
    assert.ok(firstCalls.length < 4, "the turn stopped before its script ran out");
    const firstCost = firstCalls.reduce((sum, call) => sum + (call["costUsd"] as number), 0);
    assert.ok(firstCost >= 0.01, `the calls cost ${firstCost}`);
    const cliOwn = cliLines(firstEvents, 1).find((line) => line["type"] === "result")!["total_cost_usd"] as number;
    assert.ok(Math.abs(cliOwn - firstCost) < 1e-9, `the CLI's own total ${cliOwn} vs the log's ${firstCost}`);

    // More budget, then someone else's turn spends it while this one runs its tool: the gateway
    // refuses this turn's next call.
    await setLimits(stage, { tenant: "acme/api", budgetUsd: 0.05, overBudget: "fail" });
    await new Promise((resolve) => setTimeout(resolve, 2100)); // the worker's cached limits age out
    const second = await stage.producer.enqueueTurn({ prompt: "sleep", cwd: stage.ws, tenant: "acme/api" });
    for (;;) {
      const events = await stage.events(second.session, second.turn);
      if (modelCalls(events).length > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await ledger.spend("acme/api", "another-turns-call", 0.05);
    const secondResult = await stage.producer.waitForTurn(second.turn, { timeoutMs: 90_000 });
    assert.equal(secondResult.errorKind, "tenant_budget", JSON.stringify(secondResult));
    const secondCalls = modelCalls(await stage.events(second.session, second.turn));
    // The CLI tries again a few times; every try after the first refusal is refused as well.
    const firstRefused = secondCalls.findIndex((call) => call["refusedFor"] === "tenant_budget");
    assert.equal(firstRefused, 1, JSON.stringify(secondCalls));
    for (const call of secondCalls.slice(firstRefused)) {
      assert.equal(call["answeredBy"], "policy");
      assert.equal(call["refusedFor"], "tenant_budget");
    }

    // Counted once: the ledger holds what the log's answered calls cost (each rounded up to the
    // micro-USD), and the spend added from outside.
    const answered = [...firstCalls, ...secondCalls].filter((call) => call["status"] === 200);
    const logged = answered.reduce((sum, call) => sum + (call["costUsd"] as number), 0) + 0.05;
    const { spentUsd } = await ledger.spent("acme/api");
    assert.ok(spentUsd >= logged && spentUsd - logged < answered.length * 1e-6, `ledger ${spentUsd} vs log ${logged}`);

    // Over budget now: the next turn fails before any attempt, and `run --wait` says so with its
    // own exit code.
    const env = {
      REDIS_URL: "redis://127.0.0.1:6379",
      TURNSTREAM_PREFIX: stage.space.logPrefix,
      TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix,
    };
    const run = await turnstream(
      ["run", "--cwd", stage.ws, "--tenant", "acme/api", "--wait", "--json", "--timeout", "60s", "again"],
      env,
    );
    assert.equal(run.code, EXIT.overBudget, run.stdout + run.stderr);
    assert.match(run.stdout, /tenant_budget/);
    const third = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as { session: string };
    const thirdEvents = await stage.events(third.session);
    assert.equal(thirdEvents.filter((e) => e.kind === "attempt.started").length, 0);
    assert.match(String((failedOf(thirdEvents)["error"] as { message: string }).message), /of its \$0\.05 budget/);

    // Someone who can write Redis raises the budget: the record no longer verifies, and the tenant's
    // turns fail closed instead of running unchecked.
    const limitsKey = `${stage.space.logPrefix}tenants:limits`;
    const raw = JSON.parse((await stage.redis.hget(limitsKey, "acme/api"))!) as Record<string, unknown>;
    await stage.redis.hset(limitsKey, "acme/api", JSON.stringify({ ...raw, budgetUsd: 1000 }));
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const forged = await stage.producer.enqueueTurn({ prompt: "x", cwd: stage.ws, tenant: "acme/api" });
    const forgedResult = await stage.producer.waitForTurn(forged.turn, { timeoutMs: 60_000 });
    assert.equal(forgedResult.errorKind, "tenant_limits");
  } finally {
    await stage.dispose();
  }
});

test("over budget with the `wait` policy: the turn holds nothing until the spend ages out, then runs", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "ran" }] }] });
  try {
    await setLimits(stage, { tenant: "team-w", budgetUsd: 0.001, overBudget: "wait" });
    const window = { budgetWindowMs: 3000, spendBucketMs: 1000 };
    const ledger = new TenantLedger(stage.redis, stage.space.logPrefix, {
      windowMs: window.budgetWindowMs,
      bucketMs: window.spendBucketMs,
    });
    await ledger.spend("team-w", "earlier-call", 0.002);
    const spentAt = Date.now();
    stage.worker({ operatorKeys: OPERATOR_KEYS, tenants: window });
    const queued = await stage.producer.enqueueTurn({ prompt: "hi", cwd: stage.ws, tenant: "team-w" });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const job = await stage.producer.queue.getJob(queued.turn);
    assert.equal(await job!.getState(), "delayed", "waiting, not holding a worker");
    assert.equal(
      (await stage.events(queued.session, queued.turn)).filter((e) => e.kind === "attempt.started").length,
      0,
    );
    const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 30_000 });
    assert.equal(result.status, "finished");
    const started = (await stage.events(queued.session, queued.turn)).find((e) => e.kind === "attempt.started")!;
    assert.ok(Date.parse(started.at) - spentAt >= window.budgetWindowMs, "it started once the spend had aged out");
  } finally {
    await stage.dispose();
  }
});

test("a running limit of 1: a tenant's turns run one at a time across workers, the next woken as soon as a slot frees", async () => {
  const sleepy = {
    content: [{ type: "tool_use", name: "Bash", input: { command: "sleep 1.5", description: "wait" } }],
  };
  const stage = await rig({
    responses: [sleepy, { content: [{ type: "text", text: "a" }] }, sleepy, { content: [{ type: "text", text: "b" }] }],
  });
  try {
    await setLimits(stage, { tenant: "solo", maxRunning: 1, overBudget: "wait" });
    stage.worker({ operatorKeys: OPERATOR_KEYS, toolSandbox: { mode: "off" } });
    stage.worker({ operatorKeys: OPERATOR_KEYS, toolSandbox: { mode: "off" } });
    const turns = await Promise.all(
      ["one", "two"].map((prompt) => stage.producer.enqueueTurn({ prompt, cwd: stage.ws, tenant: "solo" })),
    );
    for (const queued of turns)
      assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 })).status, "finished");
    const spans = await Promise.all(
      turns.map(async (queued) => {
        const events = await stage.events(queued.session, queued.turn);
        const at = (kind: string): number => Date.parse(events.find((e) => e.kind === kind)!.at);
        return { start: at("attempt.started"), end: at("turn.finished") };
      }),
    );
    spans.sort((left, right) => left.start - right.start);
    assert.ok(spans[1]!.start >= spans[0]!.end, `the turns overlapped: ${JSON.stringify(spans)}`);
    // Woken by the release, not by its own back-off delay.
    assert.ok(spans[1]!.start - spans[0]!.end < 900, `the second started ${spans[1]!.start - spans[0]!.end} ms after`);
  } finally {
    await stage.dispose();
  }
});
