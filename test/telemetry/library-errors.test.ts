// Library errors as log lines: repeats of one error are counted, not written (one line per message
// per interval, the count on the next line), and what libraries print to the console becomes one
// scrubbed JSON line of the logger per call, its stack cut to the line naming the error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { errorReporter, RepeatLimiter } from "../../src/kernel/index.ts";
import { createLogger, createScrubber, routeConsoleToLogger } from "../../src/telemetry/index.ts";

function capture(env: Record<string, string> = {}) {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    scrubber: createScrubber({ env }),
    level: "debug",
    destination: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) },
  });
  return { lines, logger };
}

test("error reporter: one line per message per interval, repeats counted into the next", () => {
  let now = 1_000_000;
  const { lines, logger } = capture();
  const report = errorReporter(logger, new RepeatLimiter(30_000, () => now));
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
  for (let repeat = 0; repeat < 100; repeat++) {
    report("redis connection error", refused);
    now += 100;
  }
  report("redis connection error", new Error("Connection is closed."));
  report("queue error", refused);
  assert.deepEqual(
    lines.map((l) => [l["msg"], (l["err"] as { message: string }).message]),
    [
      ["redis connection error", "connect ECONNREFUSED 127.0.0.1:1"],
      ["redis connection error", "Connection is closed."],
      ["queue error", "connect ECONNREFUSED 127.0.0.1:1"],
    ],
  );
  assert.equal(lines[0]!["level"], 40);
  assert.equal((lines[0]!["err"] as { code: string }).code, "ECONNREFUSED");
  assert.equal("suppressed" in lines[0]!, false);
  now += 30_000;
  report("redis connection error", refused);
  assert.equal(lines.length, 4);
  assert.equal(lines[3]!["suppressed"], 99);
  report("redis connection error", refused);
  assert.equal(lines.length, 4, "the interval starts again");
});

test("the limiter forgets the oldest kinds past its cap, so messages that always differ cannot grow it", () => {
  let now = 0;
  const limiter = new RepeatLimiter(30_000, () => now);
  for (let kind = 0; kind < 10_000; kind++) assert.equal(limiter.admit(`port ${kind}`), 0);
  // The first kinds were forgotten: seen again, they pass at once.
  assert.equal(limiter.admit("port 0"), 0);
  assert.equal(limiter.admit("port 9999"), undefined);
});

test("console calls become scrubbed JSON lines of the logger, one line each, repeats dropped; restore puts the console back", () => {
  const secret = "hunter2-console-secret-value";
  const { lines, logger } = capture({ REDIS_PASSWORD: secret });
  const original = console.error;
  const restore = routeConsoleToLogger(logger, new RepeatLimiter(30_000, () => 0));
  try {
    const err = new Error(`connect ECONNREFUSED redis://:${secret}@127.0.0.1:1`);
    console.error(err);
    console.error(err);
    console.error("[ioredis] Unhandled error event:", err.stack);
    console.warn("IMPORTANT! Eviction policy is %s", "allkeys-lru");
    console.log({ a: 1 });
    console.debug("debug note");
  } finally {
    restore();
  }
  assert.equal(console.error, original);
  assert.deepEqual(
    lines.map((l) => [l["level"], l["source"], l["msg"]]),
    [
      [50, "console", "Error: connect ECONNREFUSED redis://:[REDACTED:REDIS_PASSWORD]@127.0.0.1:1"],
      [
        50,
        "console",
        "[ioredis] Unhandled error event: Error: connect ECONNREFUSED redis://:[REDACTED:REDIS_PASSWORD]@127.0.0.1:1",
      ],
      [40, "console", "IMPORTANT! Eviction policy is allkeys-lru"],
      [30, "console", "{ a: 1 }"],
      [20, "console", "debug note"],
    ],
  );
  assert.ok(!JSON.stringify(lines).includes(secret));
});
