// A caller's event observers see each attempt as the worker writes it: `attempt(ctx)` once per
// attempt, before its first event, then every event of that attempt in log order (the same kinds,
// times and data the log holds), and `ctx.scrub` knows the run's secret values. The real CLI against
// the scripted model server; an overload on attempt 1 gives a second attempt.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { AttemptContext, EventObserver, ObservedEvent } from "../../src/events/index.ts";
import { rig } from "./_more.ts";

test("observers: one context per attempt, every event in log order, and a scrub that knows the run's secrets", async () => {
  const r = await rig(
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
        onEvent(e) {
          mine.push(e);
          if (e.kind === "attempt.started") scrubbed.push(ctx.scrub(`token ${secret}`, "test"));
        },
      };
    },
  };
  try {
    r.worker({ retry: { baseMs: 100, maxMs: 500 }, observers: [observer], secretEnv: { OBS_PLAIN: secret } });
    const t = await r.producer.enqueueTurn({
      prompt: "hello",
      cwd: r.ws,
      options: { model: "claude-test", env: { GREETING: { fromEnv: "OBS_PLAIN" } } },
    });
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 40_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    assert.equal(res.attempt, 2);

    assert.deepEqual(
      contexts.map((c) => [c.session, c.turn, c.attempt, c.requestModel]),
      [
        [t.session, t.turn, 1, "claude-test"],
        [t.session, t.turn, 2, "claude-test"],
      ],
    );
    const events = await r.events(t.session, t.turn);
    for (const c of contexts) {
      const logged = events.filter((e) => e.attempt === c.attempt);
      assert.deepEqual(
        seen.get(c.attempt)!.map((e) => [e.kind, e.at, e.epoch, JSON.stringify(e.data)]),
        logged.map((e) => [e.kind, e.at, e.epoch, JSON.stringify(e.data)]),
        `attempt ${c.attempt}: the observer saw what the log holds, in its order`,
      );
      assert.equal(logged.find((e) => e.kind === "attempt.started")?.at, c.startedAt);
    }
    assert.equal(scrubbed.length, 2);
    for (const s of scrubbed) assert.ok(!s.includes(secret) && s.startsWith("token "), s);
  } finally {
    await r.dispose();
  }
});
