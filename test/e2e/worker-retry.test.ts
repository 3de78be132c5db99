// Retries by error kind, with the real CLI against the scripted model server: rate limits and
// overloads get another attempt after the policy's (and the CLI's) delay; auth and invalid requests
// fail at once.
import { test, mock } from "node:test";
import assert from "node:assert/strict";
import { Job } from "bullmq";
import { retryDelayMs, DEFAULT_RETRY } from "../../src/worker/index.ts";
import { atMs, cliLines, dataOf, kindsOf, rig } from "../worker/_more.ts";
import { waitUntil } from "../worker/_support.ts";

const SMALL_RETRY = { baseMs: 150, maxMs: 2000 };

for (const errorCase of [
  { status: 429, type: "rate_limit_error", kind: "rate_limit" },
  { status: 529, type: "overloaded_error", kind: "overloaded" },
]) {
  test(`${errorCase.status} (${errorCase.kind}) then success: the turn finishes on attempt 2 after the recorded delay`, async () => {
    const setup = await rig({
      responses: [
        {
          error: {
            status: errorCase.status,
            type: errorCase.type,
            message: "slow down",
            headers: { "retry-after": "1" },
          },
        },
        { content: [{ type: "text", text: `after ${errorCase.kind}` }] },
      ],
    });
    try {
      setup.worker({ retry: SMALL_RETRY });
      const queued = await setup.producer.enqueueTurn({ prompt: "hello", cwd: setup.ws });
      const res = await setup.producer.waitForTurn(queued.turn, { timeoutMs: 30000 });
      assert.equal(res.status, "finished", JSON.stringify(res.event.data));
      assert.equal(res.attempt, 2);
      assert.equal(res.resultText, `after ${errorCase.kind}`);
      const ev = await setup.events(queued.session, queued.turn);
      assert.deepEqual(kindsOf(ev), [
        "turn.queued",
        "attempt.started",
        "cli.exit",
        "attempt.abandoned",
        "attempt.started",
        "cli.exit",
        "session.snapshot",
        "turn.finished",
      ]);
      const result1 = cliLines(ev, 1).find((l) => l["type"] === "result")!;
      assert.equal(result1["api_error_status"], errorCase.status, "attempt 1 really was the API error");
      const abandoned = ev.find((e) => e.kind === "attempt.abandoned")!;
      assert.equal(abandoned.attempt, 1);
      assert.deepEqual(
        { ...dataOf(abandoned), delayMs: undefined },
        { reason: errorCase.kind, attempt: 1, retry: true, delayMs: undefined },
      );
      // With CLAUDE_CODE_MAX_RETRIES=0 the CLI prints no api_retry/rate_limit_event line and its result
      // carries no retry-after, so the policy alone sets this delay (the next test covers the hint).
      const delayMs = dataOf(abandoned)["delayMs"] as number;
      assert.ok(
        delayMs >= SMALL_RETRY.baseMs * 0.9 && delayMs <= SMALL_RETRY.baseMs * 1.1,
        `first retry delay ${delayMs} follows the policy`,
      );
      const started2 = ev.filter((e) => e.kind === "attempt.started")[1]!;
      assert.ok(
        atMs(started2) - atMs(abandoned) >= delayMs,
        `attempt 2 began ${atMs(started2) - atMs(abandoned)} ms after the abandonment, delay ${delayMs}`,
      );
      assert.ok(started2.epoch > abandoned.epoch);
      assert.equal(setup.server.requests().filter((q) => q.kind === "messages").length, 2);
    } finally {
      await setup.dispose();
    }
  });
}

test("429 the CLI retried itself once (CLAUDE_CODE_MAX_RETRIES=1): the worker waits at least the CLI's retry-after based delay", async (testContext) => {
  const rateLimited = {
    error: { status: 429, type: "rate_limit_error", message: "slow down", headers: { "retry-after": "1" } },
  };
  const setup = await rig({ responses: [rateLimited, rateLimited, { content: [{ type: "text", text: "finally" }] }] });
  try {
    setup.worker({ retry: SMALL_RETRY, runEnv: { CLAUDE_CODE_MAX_RETRIES: "1" } });
    // The low end of the worker's jitter: the wait must still not undercut the CLI's hint.
    testContext.mock.method(Math, "random", () => 0);
    const tr = await setup.producer.enqueueTurn({ prompt: "hello", cwd: setup.ws });
    const res = await setup.producer.waitForTurn(tr.turn, { timeoutMs: 30000 });
    mock.restoreAll();
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    assert.equal(res.attempt, 2);
    const ev = await setup.events(tr.session, tr.turn);
    const retryLine = cliLines(ev, 1).find((l) => l["type"] === "system" && l["subtype"] === "api_retry");
    assert.ok(retryLine !== undefined, "the CLI reported its own retry");
    const hint = retryLine["retry_delay_ms"] as number;
    assert.ok(hint >= 1000, `the CLI's delay ${hint} honours retry-after: 1`);
    const abandoned = ev.find((x) => x.kind === "attempt.abandoned")!;
    assert.equal(dataOf(abandoned)["reason"], "rate_limit");
    assert.ok(
      (dataOf(abandoned)["delayMs"] as number) >= hint,
      `the worker's delay ${String(dataOf(abandoned)["delayMs"])} is not below the CLI's hint ${hint}`,
    );
    const started2 = ev.filter((x) => x.kind === "attempt.started")[1]!;
    const gap = atMs(started2) - atMs(abandoned);
    assert.ok(gap >= 1000, `attempt 2 waited ${gap} ms, at least the server's retry-after`);
  } finally {
    mock.restoreAll();
    await setup.dispose();
  }
});

test("retryDelayMs never waits less than the CLI's retry hint or the rate limit's reset, whatever the jitter", (testContext) => {
  const policy = { ...DEFAULT_RETRY, baseMs: 100 };
  testContext.mock.method(Math, "random", () => 0);
  assert.ok(retryDelayMs(policy, 1, { apiRetries: 1, retryDelayMs: 1000 }) >= 1000, "below the CLI's retry_delay_ms");
  const now = 1_000_000;
  assert.ok(
    retryDelayMs(policy, 1, { apiRetries: 0, resetsAtMs: now + 5000 }, now) >= 5000,
    "before the rate limit resets",
  );
});

for (const errorCase of [
  { status: 401, type: "authentication_error", message: "invalid x-api-key", kind: "auth" },
  { status: 400, type: "invalid_request_error", message: "prompt is too long", kind: "invalid_request" },
]) {
  test(`${errorCase.status} (${errorCase.kind}): the turn fails after one attempt, no retry`, async () => {
    const setup = await rig({
      responses: [
        { error: { status: errorCase.status, type: errorCase.type, message: errorCase.message } },
        { content: [{ type: "text", text: "must not be asked for" }] },
      ],
    });
    try {
      setup.worker({ retry: SMALL_RETRY });
      const queued = await setup.producer.enqueueTurn({ prompt: "hello", cwd: setup.ws });
      const res = await setup.producer.waitForTurn(queued.turn, { timeoutMs: 30000 });
      assert.equal(res.status, "failed");
      assert.equal(res.errorKind, errorCase.kind);
      assert.equal(res.attempt, 1);
      assert.equal(dataOf(res.event)["retryable"], false);
      const ev = await setup.events(queued.session, queued.turn);
      assert.deepEqual(kindsOf(ev), ["turn.queued", "attempt.started", "cli.exit", "turn.failed"]);
      const job = (await Job.fromId(setup.producer.queue, queued.turn))!;
      // The job record settles just after the log's terminal event.
      await waitUntil(async () => (await job.getState()) === "failed", 5000, "the job to be failed");
      assert.equal(job.attemptsMade <= 1, true);
      assert.equal(setup.server.requests().filter((q) => q.kind === "messages").length, 1, "the model was asked once");
      assert.equal(setup.server.remaining(), 1);
      await waitUntil(
        async () => (await setup.producer.order.pending(queued.session)).length === 0,
        5000,
        "the session's pending list to empty",
      );
    } finally {
      await setup.dispose();
    }
  });
}
