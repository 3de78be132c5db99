// The one backoff every retry loop waits by: doubling from the base, capped, jitter within its range.
import { test } from "node:test";
import assert from "node:assert/strict";
import { backoffDelayMs } from "../../src/kernel/index.ts";

test("backoffDelayMs doubles from the base per retry and stops at the cap", () => {
  const options = { baseMs: 50, maxMs: 2000 };
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7].map((attempt) => backoffDelayMs(attempt, options)),
    [50, 100, 200, 400, 800, 1600, 2000],
  );
  assert.equal(backoffDelayMs(0, options), 50, "an attempt below the first waits the base");
  assert.equal(backoffDelayMs(10_000, options), 2000, "a huge attempt number still gives the cap");
});

test("backoffDelayMs with jitter stays within the range applied to the capped wait", () => {
  for (let draw = 0; draw < 1000; draw++) {
    const low = backoffDelayMs(3, { baseMs: 100, maxMs: 10_000, jitter: [0.5, 1] });
    assert.ok(low >= 200 && low <= 400, `${low} within [200, 400]`);
    const capped = backoffDelayMs(20, { baseMs: 100, maxMs: 1000, jitter: [0.9, 1.1] });
    assert.ok(capped >= 900 && capped <= 1100, `${capped} within [900, 1100]`);
  }
});
