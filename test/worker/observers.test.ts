// A caller's event observers see each attempt as the worker writes it: `attempt(ctx)` once per
// attempt, before its first event, then every event of that attempt in log order (the same kinds,
// times and data the log holds), and `ctx.scrub` knows the run's secret values. The real CLI against
// the scripted model server; an overload on attempt 1 gives a second attempt.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { AttemptContext, EventObserver, ObservedEvent } from "../../src/events/index.ts";
import { rig } from "./_more.ts";

test("observers: one context per attempt, every event in log order, and a scrub that knows the run's secrets", async () => {
  const stage = await rig(
    {
      responses: [
        { error: { status: 529, type: "overloaded_error", message: "slow down" } },
        { content: [{ type: "text", text: "second time lucky" }] },
      ],
    },
    { allowEnv: ["GREETING"] },
  );
  // A plain name: only the job's `{ fromEnv }` reference marks the value secret.
  const secret = "obs-secret-value-5a9c1e7d";
  const contexts: AttemptContext[] = [];
  const seen = new Map<number, ObservedEvent[]>();
  const scrubbed: string[] = [];
  const observer: EventObserver = {
    attempt(ctx) {
      contexts.push(ctx);
      const mine: ObservedEvent[] = [];
      seen.set(ctx.attempt, mine);
      return {
        onEvent(event) {
          mine.push(event);
          if (event.kind === "attempt.started") scrubbed.push(ctx.scrub(`token ${secret}`, "test"));
        },
      };
    },
  };
  try {
    stage.worker({ retry: { baseMs: 100, maxMs: 500 }, observers: [observer], secretEnv: { OBS_PLAIN: secret } });
    const queued = await stage.producer.enqueueTurn({
      prompt: "hello",
      cwd: stage.ws,
      options: { model: "claude-test", env: { GREETING: { fromEnv: "OBS_PLAIN" } } },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    assert.equal(res.attempt, 2);

    assert.deepEqual(
      contexts.map((c) => [c.session, c.turn, c.attempt, c.requestModel]),
      [
        [queued.session, queued.turn, 1, "claude-test"],
        [queued.session, queued.turn, 2, "claude-test"],
      ],
    );
    const events = await stage.events(queued.session, queued.turn);
    for (const attemptContext of contexts) {
      const logged = events.filter((e) => e.attempt === attemptContext.attempt);
      assert.deepEqual(
        seen.get(attemptContext.attempt)!.map((e) => [e.kind, e.at, e.epoch, JSON.stringify(e.data)]),
        logged.map((e) => [e.kind, e.at, e.epoch, JSON.stringify(e.data)]),
        `attempt ${attemptContext.attempt}: the observer saw what the log holds, in its order`,
      );
      assert.equal(logged.find((e) => e.kind === "attempt.started")?.at, attemptContext.startedAt);
    }
    assert.equal(scrubbed.length, 2);
    for (const scrubbedText of scrubbed)
      assert.ok(!scrubbedText.includes(secret) && scrubbedText.startsWith("token "), scrubbedText);
  } finally {
    await stage.dispose();
  }
});
