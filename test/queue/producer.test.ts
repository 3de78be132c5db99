// The producer against Redis: validation naming the field, templates, idempotency, secret-free job
// records, turn.queued in the log with the rendered prompt and the trace context.
import { test } from "node:test";
import assert from "node:assert/strict";
import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { Job } from "bullmq";
import { createProducer, InvalidTurnError, MissingVariableError, renderPrompt } from "../../src/queue/index.ts";
import { cleanupKeys, readAll, redisFor, testSpace } from "../worker/_support.ts";

test("enqueue: bad payloads are refused naming the field; placeholders without values are refused naming them", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  try {
    const cwd = space.workspace();
    const refused = async (input: unknown, field: string): Promise<void> => {
      const err = await producer.enqueueTurn(input as never).then(
        () => assert.fail(`accepted ${JSON.stringify(input)}`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof InvalidTurnError, String(err));
      assert.equal(err.field, field, err.message);
      assert.ok(err.message.includes(field));
    };
    await refused({ cwd }, "prompt");
    await refused({ prompt: "hi", cwd: "relative/dir" }, "cwd");
    await refused({ prompt: "hi", cwd, session: "bad{tag}" }, "session");
    await refused({ prompt: "hi", cwd, options: { maxTurns: -1 } }, "options.maxTurns");
    await refused(
      { prompt: "hi", cwd, options: { env: { ANTHROPIC_API_KEY: "sk-ant-secret-value-123456" } } },
      "options.env.ANTHROPIC_API_KEY",
    );
    await refused({ prompt: "hi", cwd, options: { nope: 1 } }, "options");
    const err = await producer.enqueueTurn({ prompt: "hello {{user.name}}", cwd, variables: { user: {} } }).then(
      () => assert.fail("accepted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof MissingVariableError);
    assert.equal(err.placeholder, "user.name");
    assert.equal(renderPrompt("{{ a.b }} and {{c}}", { a: { b: "x" }, c: 3 }), "x and 3");
    assert.equal(await producer.queue.count(), 0, "nothing was queued");
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("enqueue: same idempotency key twice enqueues once; the job holds references, not secret values; trace context travels", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({
    redis,
    logPrefix: space.logPrefix,
    queuePrefix: space.queuePrefix,
    allowEnv: ["GITHUB_TOKEN"],
  });
  try {
    const cwd = space.workspace();
    const input = {
      prompt: "review {{pr.id}}",
      variables: { pr: { id: 7 } },
      cwd,
      idempotencyKey: "pr-7-review",
      options: { env: { GITHUB_TOKEN: { fromEnv: "WORKER_GH_TOKEN" }, LANG: "C.UTF-8" } },
    };
    // What a process with OTel set up has: a context manager and the W3C propagator.
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const span = trace.wrapSpanContext({
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      traceFlags: TraceFlags.SAMPLED,
    });
    const traced = await context.with(trace.setSpan(context.active(), span), () => producer.enqueueTurn(input));
    const again = await producer.enqueueTurn(input);
    assert.equal(again.turn, traced.turn);
    assert.equal(again.session, traced.session);
    assert.equal(traced.created, true);
    assert.equal(again.created, false);
    assert.equal(again.queuedSeq, traced.queuedSeq);
    assert.equal(await producer.queue.count(), 1);
    assert.deepEqual(await producer.order.pending(traced.session), [traced.turn]);
    const events = await readAll(producer.log, traced.session);
    assert.deepEqual(
      events.map((e) => e.kind),
      ["turn.queued"],
    );
    const queuedData = events[0]!.data as Record<string, unknown>;
    assert.equal(queuedData["prompt"], "review 7");
    assert.equal(queuedData["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    const job = await Job.fromId(producer.queue, traced.jobId);
    assert.equal(job?.data.prompt, "review 7");
    assert.deepEqual(job?.data.options.env, { GITHUB_TOKEN: { fromEnv: "WORKER_GH_TOKEN" }, LANG: "C.UTF-8" });
    assert.equal(job?.data.traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("a popped head hands over to the next turn: woken when it had found another turn at the head, left alone otherwise", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  try {
    const { order, queue } = producer;
    const session = `s-wake-${space.id}`;
    const [turnA, turnB, turnC, turnD] = ["a", "b", "c", "d"].map((x) => `t_${x}${space.id}`) as [
      string,
      string,
      string,
      string,
    ];
    for (const turn of [turnA, turnB, turnC, turnD]) await order.register(session, turn);
    // b's and c's jobs find a at the head and wait out a delay; d's job never ran.
    for (const turn of [turnB, turnC, turnD]) await queue.add("turn", {}, { jobId: turn, delay: 60_000 });
    assert.equal((await order.acquire(session, turnA, "tok-a", 10_000)).status, "ok");
    assert.equal((await order.acquire(session, turnB, "tok-b", 10_000)).status, "wait");
    assert.equal((await order.acquire(session, turnC, "tok-c", 10_000)).status, "wait");

    const afterA = await order.finish(session, turnA, "tok-a");
    assert.deepEqual(afterA, { turn: turnB, deferred: true });
    await order.wake(afterA);
    assert.equal(await queue.getJobState(turnB), "waiting", "the deferred next head is woken");
    assert.equal(await queue.getJobState(turnC), "delayed", "only the head is woken");

    assert.equal((await order.acquire(session, turnB, "tok-b", 10_000)).status, "ok");
    const afterB = await order.finish(session, turnB, "tok-b");
    assert.deepEqual(afterB, { turn: turnC, deferred: true });
    assert.deepEqual(
      await order.finish(session, turnB, "tok-b"),
      { turn: turnC, deferred: false },
      "a turn is woken once",
    );

    assert.equal((await order.acquire(session, turnC, "tok-c", 10_000)).status, "ok");
    const afterC = await order.finish(session, turnC, "tok-c");
    assert.deepEqual(afterC, { turn: turnD, deferred: false }, "d's job never found another head");
    await order.wake(afterC);
    assert.equal(await queue.getJobState(turnD), "delayed", "nothing is sent for a next head that was not deferred");
    assert.deepEqual(await order.drop(session, turnD), { turn: "", deferred: false });
    assert.equal(await redis.exists(order.keys(session).deferred), 0, "no mark outlives its turn");
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("promote wakes a delayed turn job at once; a waiting or missing one is left as it is", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  try {
    const delayed = await producer.queue.add("turn", {}, { jobId: `t_delayed${space.id}`, delay: 60_000 });
    const waiting = await producer.queue.add("turn", {}, { jobId: `t_waiting${space.id}` });
    await producer.order.promote(delayed.id!);
    await producer.order.promote(waiting.id!);
    await producer.order.promote(`t_missing${space.id}`);
    assert.equal(await producer.queue.getJobState(delayed.id!), "waiting");
    assert.equal(await producer.queue.getJobState(waiting.id!), "waiting");
  } finally {
    await producer.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
  }
});

test("waiting for a turn this producer enqueued needs no look-up; another producer finds it through the turn record", async () => {
  const space = testSpace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const other = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const lookups: string[] = [];
  const get = redis.get.bind(redis);
  redis.get = ((key: string, ...rest: never[]) => (lookups.push(key), get(key, ...rest))) as typeof redis.get;
  try {
    const enqueued = await producer.enqueueTurn({ prompt: "hi", cwd: space.workspace() });
    const { epoch, attempt } = await producer.log.beginAttempt(enqueued.session, enqueued.turn);
    await producer.log.append(enqueued.session, epoch, [
      { turn: enqueued.turn, attempt, kind: "turn.finished", data: { attempt, resultText: "done" } },
    ]);
    const mine = await producer.waitForTurn(enqueued.turn, { timeoutMs: 10000 });
    assert.equal(mine.status, "finished");
    assert.equal(mine.resultText, "done");
    assert.deepEqual(
      lookups.filter((k) => k.includes(enqueued.turn)),
      [],
      "its own turn: no turn-record read",
    );
    const theirs = await other.waitForTurn(enqueued.turn, { timeoutMs: 10000 });
    assert.equal(theirs.status, "finished");
    assert.equal(
      lookups.filter((k) => k.includes(enqueued.turn)).length,
      1,
      "another producer reads the turn record once",
    );
  } finally {
    await producer.close();
    await other.close();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
