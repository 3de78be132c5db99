// How an answer's retry-after is read: seconds, retry-after-ms, HTTP dates.
import { test } from "node:test";
import assert from "node:assert/strict";
import { retryAfterMs } from "../../src/gateway/index.ts";

test("retry-after: seconds, retry-after-ms first, HTTP dates (past ones are 0), nonsense is none", () => {
  const now = Date.parse("2026-12-05T10:00:00Z");
  assert.equal(retryAfterMs({ "retry-after": "30" }, now), 30_000);
  assert.equal(retryAfterMs({ "retry-after": "1.5" }, now), 1500);
  assert.equal(retryAfterMs({ "retry-after": " 0 " }, now), 0);
  assert.equal(retryAfterMs({ "retry-after-ms": "250", "retry-after": "30" }, now), 250);
  assert.equal(retryAfterMs({ "retry-after": "Sat, 05 Dec 2026 10:00:42 GMT" }, now), 42_000);
  assert.equal(retryAfterMs({ "retry-after": "Sat, 05 Dec 2026 09:59:00 GMT" }, now), 0);
  assert.equal(retryAfterMs({ "retry-after": ["7", "9"] }, now), 7000);
  for (const nonsense of ["-5", "soon", "1e3", "", "Sat, 05 Dec 2026 10:00:42", "0x10"])
    assert.equal(retryAfterMs({ "retry-after": nonsense }, now), undefined, JSON.stringify(nonsense));
  assert.equal(retryAfterMs({ "retry-after-ms": "NaN" }, now), undefined);
  assert.equal(retryAfterMs({}, now), undefined);
});
