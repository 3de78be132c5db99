// The exit-code table: one module (src/bin/exit-codes.ts), the generated reference
// (docs/reference/exit-codes.md) listing each outcome with its code, and every
// error kind the classifier, the runner and the worker can end a turn with placed in a class.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  EXIT_CODE_OF_OUTCOME,
  EXIT_ON_SIGNAL,
  exitCodeOf,
  outcomeOfErrorKind,
  outcomeOfTurn,
  type Outcome,
} from "../../src/bin/exit-codes.ts";
import { ERROR_KINDS, isRetryableKind } from "../../src/events/index.ts";

test("the exit-code reference lists each outcome with the module's code", () => {
  const section = readFileSync(join(process.cwd(), "docs", "reference", "exit-codes.md"), "utf8");
  const rows = [...section.matchAll(/^\| (\d) \| ([^|]+) \|/gm)].map((row) => ({
    code: Number(row[1]),
    outcomes: [...row[2]!.matchAll(/`(\w+)`/g)].map((outcome) => outcome[1]!),
  }));
  const listed = new Map<string, number>();
  for (const row of rows) for (const outcome of row.outcomes) listed.set(outcome, row.code);
  assert.deepEqual(Object.fromEntries(listed), { ...EXIT_CODE_OF_OUTCOME });
});

test("the reference lists the codes of a command stopped by a signal: 128 + the signal's number, as shells report it", () => {
  const section = readFileSync(join(process.cwd(), "docs", "reference", "exit-codes.md"), "utf8");
  const rows = [...section.matchAll(/^\| (\d{3}) \| `(SIG[A-Z]+)` \|/gm)].map((row) => [row[2]!, Number(row[1])]);
  assert.deepEqual(Object.fromEntries(rows), { ...EXIT_ON_SIGNAL });
  assert.deepEqual(EXIT_ON_SIGNAL, { SIGINT: 128 + 2, SIGTERM: 128 + 15 });
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
  for (const kind of ERROR_KINDS.filter(isRetryableKind))
    assert.ok(allowed.includes(outcomeOfErrorKind(kind)), `${kind} → ${outcomeOfErrorKind(kind)}`);
});

test("a turn's terminal status decides first: finished 0, cancelled 4, failed by its kind", () => {
  assert.equal(outcomeOfTurn("finished", undefined), "finished");
  assert.equal(outcomeOfTurn("cancelled", undefined), "cancelled");
  assert.equal(exitCodeOf(outcomeOfTurn("cancelled", undefined)), 4);
  assert.equal(outcomeOfTurn("failed", "max_turns"), "task_failed");
  assert.equal(outcomeOfTurn("failed", "rate_limit"), "infrastructure");
});
