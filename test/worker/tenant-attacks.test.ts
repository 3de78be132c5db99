// Attacks on tenants' budgets and slots with the real CLI behind the worker's gateway. The run is
// hostile: its Bash tool holds the run's gateway token and uses it (test/worker/_tenant-attacker.ts)
// to fire many model calls at once, to hang up on a streamed answer before its final usage, and to
// name a model the price table does not know. Also: several turns of one tenant at once, a job whose
// tenant was rewritten in Redis, a worker that runs only tenants with signed limits, and a worker
// killed mid-turn. Each test prints what it measured.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { parseOperatorKeys } from "../../src/decisions/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { signTenantLimits, TenantLedger, writeLimits, type TenantLimitsInput } from "../../src/tenants/index.ts";
import { operatorKey } from "../decisions/_support.ts";
import { treeMembers } from "../runner/_support.ts";
import { NODE, startWorkerProcess, workerProcessEnv } from "./_support.ts";
import { cliLines, dataOf, findTreeProcess, rig, type Rig } from "./_more.ts";

const OPERATOR_KEYS = [operatorKey.publicKey];
parseOperatorKeys(OPERATOR_KEYS);
const ATTACKER = join(import.meta.dirname, "_tenant-attacker.ts");
const attacker = (args: string): string => `${NODE} ${ATTACKER} ${args}`;
const bash = (command: string) => ({
  content: [{ type: "tool_use", name: "Bash", input: { command, description: "calls" } }],
});

async function setLimits(stage: Rig, limits: Omit<TenantLimitsInput, "by" | "at">): Promise<void> {
  const signed = signTenantLimits(operatorKey, { ...limits, by: "ops", at: new Date().toISOString() });
  await writeLimits(stage.redis, stage.space.logPrefix, signed);
}

// The run's Bash tool may run what it is told: the attacker is the run.
const BASH = { allowedTools: ["Bash"] };

const modelCalls = (events: Envelope[]) => events.filter((e) => e.kind === "model.call").map(dataOf);
const costOf = (call: Record<string, unknown>): number => (call["costUsd"] as number | undefined) ?? 0;
const usd = (amount: number): string => `$${amount.toFixed(4)}`;
const toolResults = (events: Envelope[]): string =>
  cliLines(events, 1)
    .filter((line) => line["type"] === "user")
    .map((line) => JSON.stringify(line))
    .join("\n");

test("a run that fires many model calls at once: one goes out, the rest wait for its cost and are refused; the tenant overshoots by at most that one call", async (context) => {
  const calls = 12;
  const budget = 0.02;
  // Each burst call costs $0.045 at claude-sonnet-4-5's price: together 27 times the budget.
  const burstAnswer = {
    match: "xburstx",
    content: [{ type: "text", text: "b" }],
    usage: { input_tokens: 10_000, output_tokens: 1000 },
    delayMs: 1500,
  };
  const stage = await rig({
    responses: [
      bash(attacker(`burst ${calls}`)),
      ...Array.from({ length: calls }, () => burstAnswer),
      { content: [{ type: "text", text: "after" }] },
    ],
  });
  const ledger = new TenantLedger(stage.redis, stage.space.logPrefix);
  try {
    await setLimits(stage, { tenant: "burst", budgetUsd: budget, overBudget: "fail" });
    stage.worker({ operatorKeys: OPERATOR_KEYS, toolSandbox: { mode: "off" } });
    const queued = await stage.producer.enqueueTurn({ prompt: "go", cwd: stage.ws, tenant: "burst", options: BASH });
    const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 120_000 });
    const events = await stage.events(queued.session, queued.turn);
    const answered = modelCalls(events).filter((call) => call["status"] === 200);
    const burst = answered.filter((call) => call["model"] === "claude-sonnet-4-5");
    const { spentUsd } = await ledger.spent("burst");
    const dearest = Math.max(...answered.map(costOf));
    context.diagnostic(
      `${burst.length} of ${calls} parallel calls answered; spent ${usd(spentUsd)} of ${usd(budget)}: ` +
        `overshoot ${usd(spentUsd - budget)}, one call at most ${usd(dearest)}`,
    );
    assert.equal(result.errorKind, "tenant_budget", JSON.stringify(result));
    assert.match(toolResults(events), /statuses 200( 400){11}/);
    assert.equal(burst.length, 1, "calls past the first waited for its cost, then were refused");
    assert.ok(spentUsd <= budget + dearest + 1e-5, `spent ${spentUsd}: more than the budget and one call`);
  } finally {
    await stage.dispose();
  }
});

test("a run that hangs up on a streamed answer before its final usage, or names a model with no price, is charged the most such a call can cost", async (context) => {
  const stage = await rig({
    responses: [
      bash(`${attacker("cut")}; ${attacker("unpriced")}; ${attacker("count")}`),
      // Its final usage (message_delta) says 50,000 output tokens: $0.75 at claude-sonnet-4-5's price.
      {
        match: "xcutx",
        content: [{ type: "text", text: "x".repeat(3000) }],
        usage: { input_tokens: 10, output_tokens: 50_000 },
        chunkDelayMs: 20,
      },
      {
        match: "xunpricedx",
        content: [{ type: "text", text: "u" }],
        usage: { input_tokens: 100_000, output_tokens: 10_000 },
      },
      { content: [{ type: "text", text: "after" }] },
    ],
  });
  const ledger = new TenantLedger(stage.redis, stage.space.logPrefix);
  try {
    await setLimits(stage, { tenant: "sly", budgetUsd: 100, overBudget: "fail" });
    stage.worker({ operatorKeys: OPERATOR_KEYS, toolSandbox: { mode: "off" } });
    const queued = await stage.producer.enqueueTurn({ prompt: "go", cwd: stage.ws, tenant: "sly", options: BASH });
    const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 120_000 });
    assert.equal(result.status, "finished", JSON.stringify(result));
    const events = await stage.events(queued.session, queued.turn);
    const output = toolResults(events);
    assert.match(output, /hung up after the first delta \(200, final usage seen: false\)/);
    assert.match(output, /unknown model answered 200/);
    assert.match(output, /count_tokens 200/);
    const { spentUsd } = await ledger.spent("sly");
    const logged = modelCalls(events).reduce((sum, call) => sum + costOf(call), 0);
    context.diagnostic(`spent ${usd(spentUsd)}; the log's model.call costs add up to ${usd(logged)}`);
    // The cut answer: up to its max_tokens of output (64,000 at $15 per million); the unknown model's
    // usage at the dearest price in the table ($15/$75 per million).
    const cutAtMost = (64_000 * 15) / 1e6;
    const unpricedAtDearest = (100_000 * 15 + 10_000 * 75) / 1e6;
    assert.ok(spentUsd >= cutAtMost + unpricedAtDearest, `spent only ${spentUsd}`);
  } finally {
    await stage.dispose();
  }
});

test("three turns of one tenant at once, each capped at what the tenant has left: their calls go out one at a time near the budget, so together they overshoot by at most one call", async (context) => {
  const budget = 0.01;
  const slow = {
    content: [{ type: "text", text: "t" }],
    usage: { input_tokens: 1000, output_tokens: 100 },
    delayMs: 4000,
  };
  const stage = await rig({ responses: [slow, slow, slow] });
  const ledger = new TenantLedger(stage.redis, stage.space.logPrefix);
  try {
    await setLimits(stage, { tenant: "trio", budgetUsd: budget, overBudget: "fail" });
    stage.worker({ operatorKeys: OPERATOR_KEYS, toolSandbox: { mode: "off" }, concurrency: 3 });
    const turns = await Promise.all(
      ["one", "two", "three"].map((prompt) => stage.producer.enqueueTurn({ prompt, cwd: stage.ws, tenant: "trio" })),
    );
    const results = await Promise.all(
      turns.map((queued) => stage.producer.waitForTurn(queued.turn, { timeoutMs: 120_000 })),
    );
    const answered = (
      await Promise.all(turns.map(async (queued) => modelCalls(await stage.events(queued.session, queued.turn))))
    )
      .flat()
      .filter((call) => call["status"] === 200);
    const { spentUsd } = await ledger.spent("trio");
    const dearest = Math.max(...answered.map(costOf));
    context.diagnostic(
      `${answered.length} calls answered (${results.map((r) => r.errorKind ?? r.status).join(", ")}); ` +
        `spent ${usd(spentUsd)} of ${usd(budget)}: overshoot ${usd(spentUsd - budget)}, one call ${usd(dearest)}`,
    );
    assert.ok(spentUsd <= budget + dearest + 1e-5, `spent ${spentUsd}: more than the budget and one call`);
    assert.ok(results.some((r) => r.errorKind === "tenant_budget"));
  } finally {
    await stage.dispose();
  }
});

test("a job whose tenant was rewritten in Redis after it was queued fails tenant_limits instead of running as the other tenant", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "ran" }] }] });
  try {
    await setLimits(stage, { tenant: "payer", budgetUsd: 0.000001, overBudget: "fail" });
    const queued = await stage.producer.enqueueTurn({ prompt: "p", cwd: stage.ws, tenant: "payer" });
    const job = (await stage.producer.queue.getJob(queued.turn))!;
    // Someone who can write the queue moves the turn to a tenant without limits, or to none.
    await job.updateData({ ...job.data, tenant: "free" });
    const second = await stage.producer.enqueueTurn({ prompt: "q", cwd: stage.ws, session: queued.session });
    const secondJob = (await stage.producer.queue.getJob(second.turn))!;
    const { tenant: _dropped, ...untenanted } = secondJob.data as Record<string, unknown>;
    await secondJob.updateData(untenanted);
    stage.worker({ operatorKeys: OPERATOR_KEYS, toolSandbox: { mode: "off" } });
    for (const turn of [queued.turn, second.turn]) {
      const result = await stage.producer.waitForTurn(turn, { timeoutMs: 60_000 });
      assert.equal(result.errorKind, "tenant_limits", JSON.stringify(result));
      assert.match(result.error ?? "", /payer/);
    }
    assert.equal(stage.server.requests().filter((r) => r.kind === "messages").length, 0, "no CLI ran");
  } finally {
    await stage.dispose();
  }
});

test("a worker that runs only tenants with signed limits: a turn naming no tenant, or a fresh name, fails before its CLI starts; a signed tenant's runs", async () => {
  const stage = await rig({ responses: [{ content: [{ type: "text", text: "ran" }] }] });
  try {
    await setLimits(stage, { tenant: "known", budgetUsd: 5, overBudget: "fail" });
    stage.worker({ operatorKeys: OPERATOR_KEYS, tenants: { signedOnly: true, defaults: { budgetUsd: 1 } } });
    const cases = [
      { input: {}, error: /names no tenant/ },
      { input: { tenant: "fresh-name-1" }, error: /fresh-name-1 has no signed limits/ },
    ];
    for (const { input, error } of cases) {
      const queued = await stage.producer.enqueueTurn({ prompt: "p", cwd: stage.ws, ...input });
      const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
      assert.equal(result.errorKind, "tenant_limits", JSON.stringify(result));
      assert.match(result.error ?? "", error);
    }
    assert.equal(stage.server.requests().length, 0, "no CLI ran");
    const known = await stage.producer.enqueueTurn({ prompt: "p", cwd: stage.ws, tenant: "known" });
    assert.equal((await stage.producer.waitForTurn(known.turn, { timeoutMs: 60_000 })).status, "finished");
  } finally {
    await stage.dispose();
  }
});

test("a worker killed mid-turn (SIGKILL): its tenant's slot lapses with the lease, and the tenant's next turn runs", async (context) => {
  // Not a bare `sleep`: the CLI refuses a long one.
  const marker = "setTimeout(() => {}, 47250)";
  const stage = await rig({
    responses: [bash(`${NODE} -e '${marker}'`), { content: [{ type: "text", text: "next" }] }],
  });
  const ledger = new TenantLedger(stage.redis, stage.space.logPrefix);
  const env = workerProcessEnv(stage.space, stage.ws, stage.server.url, "doomed", {
    TURNSTREAM_TENANT_MAX_RUNNING: "1",
    TURNSTREAM_TOOL_SANDBOX: "off",
  });
  const doomed = await startWorkerProcess(env, join(import.meta.dirname, "_crashing-worker.ts"));
  let orphans: number[] = [];
  try {
    const first = await stage.producer.enqueueTurn({
      prompt: "sleep",
      cwd: stage.ws,
      tenant: "crashy",
      options: BASH,
    });
    let tool: ReturnType<typeof findTreeProcess>;
    for (let waited = 0; (tool = findTreeProcess(marker, stage.space.root)) === undefined; waited += 100) {
      if (waited >= 60_000) {
        const kinds = (await stage.events(first.session)).map((e) => e.kind);
        assert.fail(`the turn's tool never started: ${kinds.join(" ")}; ${JSON.stringify(doomed.lines.slice(-5))}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(await ledger.running("crashy"), 1);
    orphans = treeMembers(tool.marker);
    doomed.kill("SIGKILL");
    await doomed.exited;
    const killedAt = Date.now();
    // The crashing worker's lease is 3 s: the slot is gone once it lapses, renewed by nobody.
    while ((await ledger.running("crashy")) > 0) {
      assert.ok(Date.now() - killedAt < 10_000, "the dead worker's slot did not lapse");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    context.diagnostic(`the slot lapsed ${Date.now() - killedAt} ms after the kill`);
    stage.worker({ toolSandbox: { mode: "off" }, tenants: { defaults: { maxRunning: 1 } } });
    const next = await stage.producer.enqueueTurn({ prompt: "next", cwd: stage.ws, tenant: "crashy" });
    assert.equal((await stage.producer.waitForTurn(next.turn, { timeoutMs: 60_000 })).status, "finished");
    assert.notEqual(first.session, next.session);
  } finally {
    if (doomed.child.exitCode === null && doomed.child.signalCode === null) doomed.kill("SIGKILL");
    for (const pid of orphans) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
    }
    await stage.dispose();
  }
});
