// How an attempt whose CLI ran ends (the pure verdict): a stop from outside wins, an output limit
// fails the turn even when a result came out, a lost session is restored once when the session
// allows, a retryable failure retries below the attempt limit, everything else fails.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TurnOutcome } from "../../src/runner/index.ts";
import { errFields } from "../../src/worker/error-fields.ts";
import { verdict, type RunFacts } from "../../src/worker/outcome.ts";

const outcome: TurnOutcome = {
  sessionId: "s1",
  result: {},
  resultText: "ok",
  exitCode: 0,
  signal: null,
  durationMs: 5,
  lineCount: 3,
  pid: 4242,
  auth: "env",
  sessionFile: undefined,
};
const failure = (kind: string, retryable?: boolean) =>
  Object.assign(new Error(`${kind} happened`), { name: "ClaudeCodeCliError", kind, retryable });
const facts = (over: Partial<RunFacts>): RunFacts => ({
  stopped: false,
  outputLimitExceeded: undefined,
  outcome: undefined,
  failure: undefined,
  attempt: 1,
  maxAttempts: 5,
  restoring: false,
  lostSessionPolicy: undefined,
  restored: false,
  ...over,
});

test("finished with a result; a stop or the output limit outranks it", () => {
  assert.deepEqual(verdict(facts({ outcome })), { kind: "finished", outcome });
  assert.deepEqual(verdict(facts({ outcome, stopped: true })), { kind: "stopped" });
  const limited = verdict(facts({ outcome, outputLimitExceeded: "too much" }));
  assert.deepEqual(limited, {
    kind: "failed",
    errorKind: "output_limit",
    name: "OutputLimitExceeded",
    message: "too much",
    retryable: false,
  });
});

test("a lost session: restored once when the session's policy says so, else failed saying why", () => {
  const lost = failure("lost_session", false);
  assert.deepEqual(verdict(facts({ failure: lost, lostSessionPolicy: "restore" })), { kind: "restore" });
  // "replay", the policy's older name, as a session begun before stored it.
  assert.deepEqual(verdict(facts({ failure: lost, lostSessionPolicy: "replay" })), { kind: "restore" });
  const again = verdict(facts({ failure: lost, lostSessionPolicy: "replay", restoring: true, restored: false }));
  assert.equal(again.kind, "failed");
  assert.match(
    again.kind === "failed" ? again.message : "",
    /lost_session happened \(no session snapshot to restore\)/,
  );
  const refused = verdict(facts({ failure: lost, lostSessionPolicy: "fail", restored: true }));
  assert.match(refused.kind === "failed" ? refused.message : "", /\(the restored session file was not accepted\)/);
});

test("retryable kinds retry below the attempt limit and fail at it; other kinds fail at once", () => {
  assert.deepEqual(verdict(facts({ failure: failure("rate_limit"), attempt: 4 })), {
    kind: "retry",
    errorKind: "rate_limit",
  });
  assert.deepEqual(verdict(facts({ failure: failure("rate_limit"), attempt: 5 })), {
    kind: "failed",
    errorKind: "rate_limit",
    name: "ClaudeCodeCliError",
    message: "rate_limit happened",
    retryable: true,
  });
  assert.equal(verdict(facts({ failure: failure("auth") })).kind, "failed");
  // A kind outside the retryable set stays final even when the error calls itself retryable.
  assert.equal(errFields(failure("auth", true)).retryable, false);
  assert.equal(errFields(failure("overloaded", false)).retryable, false);
  assert.deepEqual(errFields("plain text"), {
    kind: "cli_error",
    retryable: false,
    name: "Error",
    message: "plain text",
  });
});
