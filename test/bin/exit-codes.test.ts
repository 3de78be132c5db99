// The exit-code table: one module (src/bin/exit-codes.ts), the same table in the README, and every
// error kind the classifier, the runner and the worker can end a turn with placed in a class.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  EXIT_CODE_OF_OUTCOME,
  exitCodeOf,
  outcomeOfErrorKind,
  outcomeOfTurn,
  type Outcome,
} from "../../src/bin/exit-codes.ts";
import { RETRYABLE_KINDS } from "../../src/worker/retry.ts";

test("the README's exit-code table lists each outcome with the module's code", () => {
  const readme = readFileSync(join(process.cwd(), "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("### Exit codes"));
  const rows = [...section.matchAll(/^\| (\d) \| ([^|]+) \|/gm)].map((tableRow) => ({
    code: Number(tableRow[1]),
    outcomes: [...tableRow[2]!.matchAll(/`(\w+)`/g)].map((o) => o[1]!),
  }));
  const listed = new Map<string, number>();
  for (const listedRow of rows)
    for (const listedOutcome of listedRow.outcomes) listed.set(listedOutcome, listedRow.code);
  assert.deepEqual(Object.fromEntries(listed), { ...EXIT_CODE_OF_OUTCOME });
});

test("each class of error kind exits with its code", () => {
  const expect: Record<string, number> = {
    ok: 0,
    max_turns: 1,
    max_budget: 1,
    invalid_request: 1,
    output_limit: 1,
    error_result: 1,
    limit_pids: 1,
    limit_memory: 1,
    limit_disk: 1,
    bad_payload: 2,
    bad_options: 2,
    workspace_not_allowed: 2,
    rate_limit: 3,
    overloaded: 3,
    server_error: 3,
    api_error: 3,
    lost_session: 3,
    no_result: 3,
    cli_error: 3,
    too_many_attempts: 3,
    abandoned: 3,
    log_lost: 3,
    auth: 3,
    timeout: 4,
    inactivity: 4,
    limit_duration: 4,
  };
  for (const [kind, code] of Object.entries(expect)) assert.equal(exitCodeOf(outcomeOfErrorKind(kind)), code, kind);
  assert.equal(
    outcomeOfErrorKind("a_kind_from_a_newer_worker"),
    "infrastructure",
    "an unknown kind is retried, not blamed on the task",
  );
});

test("a kind the worker retries never counts as the task's failure or a usage error", () => {
  const allowed: Outcome[] = ["infrastructure", "timed_out"];
  for (const kind of RETRYABLE_KINDS)
    assert.ok(allowed.includes(outcomeOfErrorKind(kind)), `${kind} → ${outcomeOfErrorKind(kind)}`);
});

test("a turn's terminal status decides first: finished 0, cancelled 4, failed by its kind", () => {
  assert.equal(outcomeOfTurn("finished", undefined), "finished");
  assert.equal(outcomeOfTurn("cancelled", undefined), "cancelled");
  assert.equal(exitCodeOf(outcomeOfTurn("cancelled", undefined)), 4);
  assert.equal(outcomeOfTurn("failed", "max_turns"), "task_failed");
  assert.equal(outcomeOfTurn("failed", "rate_limit"), "infrastructure");
});
