// The failure table (src/events/failures.ts) is the one source of every error kind's retry rule,
// outcome and exit code: each row is complete, the runner and the worker read their retry decision
// from it, `turn.failed` accepts only its kinds (an old log's still read), and `outcomeOf` gives a
// library user the verdict `turnstream run --wait` exits with.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ERROR_KINDS,
  EXIT_CODE_OF_OUTCOME,
  FAILURE_KINDS,
  FAILURE_KINDS_TABLE,
  isRetryableKind,
  outcomeOf,
  turnFailedData,
  dataOf,
  type Outcome,
} from "../../src/events/index.ts";
import { ClaudeCodeCliError, runTurn } from "../../src/runner/index.ts";
import { LIMIT_ERROR_KINDS } from "../../src/runner/limits.ts";
import { errFields } from "../../src/worker/error-fields.ts";
import { ERROR_TYPES } from "../../src/metrics/names.ts";
import { outcomeOf as rootOutcomeOf } from "../../src/index.ts";
import { startScriptedServer } from "../runner/_model.ts";
import { hermeticEnv, waitUntil } from "../runner/_support.ts";
import { onlyJson, turnstream } from "../bin/_cli.ts";
import { rig } from "../worker/_more.ts";

const OUTCOMES = Object.keys(EXIT_CODE_OF_OUTCOME) as Outcome[];

test("every kind of the table has a retry rule, an outcome with its exit code and a one-sentence description", () => {
  for (const kind of ERROR_KINDS) {
    const row = FAILURE_KINDS_TABLE[kind];
    assert.equal(typeof row.retryable, "boolean", kind);
    assert.ok(OUTCOMES.includes(row.outcome), `${kind}: ${row.outcome}`);
    assert.ok([0, 1, 2, 3, 4, 6].includes(outcomeOf({ status: "failed", errorKind: kind }).exitCode), kind);
    assert.match(row.description, /^[A-Z`a-z].{10,200}\.$/, kind);
    assert.ok(!row.description.includes("\n"), kind);
  }
  assert.equal(FAILURE_KINDS_TABLE.ok.outcome, "finished");
  assert.ok(!(FAILURE_KINDS as string[]).includes("ok"), "a turn never fails with ok");
});

test("a retried kind is never the task's failure or a usage error; a run limit is never retried", () => {
  for (const kind of ERROR_KINDS.filter(isRetryableKind))
    assert.ok(["infrastructure", "timed_out"].includes(FAILURE_KINDS_TABLE[kind].outcome), kind);
  for (const kind of LIMIT_ERROR_KINDS) assert.equal(isRetryableKind(kind), false, kind);
});

test("the runner, the worker and the metrics read the same table", () => {
  for (const kind of ERROR_KINDS) {
    const thrown = new ClaudeCodeCliError("x", { kind });
    assert.equal(thrown.retryable, isRetryableKind(kind), `runner: ${kind}`);
    assert.equal(thrown.code, kind);
    assert.equal(thrown.name, "ClaudeCodeCliError");
    if (kind !== "ok") assert.equal(errFields(thrown).retryable, isRetryableKind(kind), `worker: ${kind}`);
  }
  for (const kind of FAILURE_KINDS) assert.ok((ERROR_TYPES as readonly string[]).includes(kind), `metrics: ${kind}`);
  assert.equal(errFields({ kind: "no_such_kind", retryable: true }).kind, "cli_error", "an unknown kind is cli_error");
  assert.equal(errFields({ kind: "no_such_kind", retryable: true }).retryable, false);
});

test("turn.failed: an unknown kind is refused, a legacy kind reads as its successor", () => {
  const base = { attempt: 1, error: { name: "E", message: "m" }, retryable: false };
  assert.equal(turnFailedData.safeParse({ ...base, errorKind: "process_error" }).success, false);
  assert.equal(turnFailedData.safeParse({ ...base, errorKind: "ok" }).success, false);
  assert.equal(dataOf("turn.failed", { ...base, errorKind: "rate_limit" })?.errorKind, "rate_limit");
  assert.equal(dataOf("turn.failed", { ...base, errorKind: "api_error" })?.errorKind, "server_error");
  assert.deepEqual(outcomeOf({ status: "failed", errorKind: "api_error" }), { outcome: "infrastructure", exitCode: 3 });
});

test("outcomeOf: the status decides first, then the kind; an unknown kind counts as infrastructure", () => {
  assert.equal(rootOutcomeOf, outcomeOf, "the package root exports the same function");
  assert.deepEqual(outcomeOf({ status: "finished" }), { outcome: "finished", exitCode: 0 });
  assert.deepEqual(outcomeOf({ status: "cancelled" }), { outcome: "cancelled", exitCode: 4 });
  assert.deepEqual(outcomeOf({ status: "failed", errorKind: "max_turns" }), { outcome: "task_failed", exitCode: 1 });
  assert.deepEqual(outcomeOf({ status: "failed", errorKind: "bad_cwd" }), { outcome: "usage", exitCode: 2 });
  assert.deepEqual(outcomeOf({ status: "failed", errorKind: "limit_duration" }), { outcome: "timed_out", exitCode: 4 });
  assert.deepEqual(outcomeOf({ status: "failed", errorKind: "from_a_newer_worker" }), {
    outcome: "infrastructure",
    exitCode: 3,
  });
  assert.deepEqual(outcomeOf({ status: "failed", errorKind: "constructor" }), {
    outcome: "infrastructure",
    exitCode: 3,
  });
});

// `killed` is decided once: it is only ever the run handle's own kill() (src/runner/run-turn.ts: a
// worker stopping its attempt, a session's runs closed, a warm process closed), a stop turnstream
// chose, so it is never retried: another attempt would undo the stop. A CLI that a signal of someone
// else's ends (the OOM killer, an operator's kill -9) has no result line and is `no_result`, which is
// retried like any crash.
test("killed: our own kill() is final (not retried); a kill we did not send is no_result, retried", async () => {
  const server = await startScriptedServer([{ hang: true }, { hang: true }]);
  const cwd = mkdtempSync(join(tmpdir(), "ts-killed-"));
  const env = hermeticEnv(server.url);
  try {
    const ours = runTurn({ cwd, prompt: "wait for ever", env });
    await waitUntil(() => server.requests().length >= 1, 60_000, "the CLI's first request");
    ours.kill();
    const byUs = (await ours.outcome.catch((err: unknown) => err)) as ClaudeCodeCliError;
    assert.ok(byUs instanceof ClaudeCodeCliError, String(byUs));
    assert.equal(byUs.kind, "killed");
    assert.equal(byUs.retryable, false);
    assert.equal(errFields(byUs).retryable, false, "the worker does not retry it either");

    const theirs = runTurn({ cwd, prompt: "wait for ever too", env });
    await waitUntil(() => server.requests().length >= 2, 60_000, "the second CLI's request");
    process.kill(theirs.pid!, "SIGKILL");
    const byOthers = (await theirs.outcome.catch((err: unknown) => err)) as ClaudeCodeCliError;
    assert.ok(byOthers instanceof ClaudeCodeCliError, String(byOthers));
    assert.equal(byOthers.kind, "no_result");
    assert.equal(byOthers.signal, "SIGKILL");
    assert.equal(byOthers.retryable, true);
    assert.equal(errFields(byOthers).retryable, true);
  } finally {
    await server.close();
  }
});

test("outcomeOf agrees with the exit code of `turnstream run --wait` (real worker, real CLI)", async () => {
  const testRig = await rig({
    responses: [
      { error: { status: 400, type: "invalid_request_error", message: "prompt is too long" } },
      { error: { status: 401, type: "authentication_error", message: "invalid x-api-key" } },
    ],
  });
  try {
    testRig.worker();
    const env = { TURNSTREAM_PREFIX: testRig.space.logPrefix, TURNSTREAM_QUEUE_PREFIX: testRig.space.queuePrefix };
    const seen: Array<[unknown, unknown, number]> = [];
    // One after another, so each takes the scripted responses in order; the last one never reaches the CLI.
    for (const cwd of [testRig.ws, testRig.ws, join(testRig.ws, "not-made")]) {
      const ran = await turnstream(["run", "--wait", "--json", "--cwd", cwd, "--", "hello"], env);
      const said = onlyJson(ran.stdout);
      const verdict = outcomeOf({ status: said["status"] as "failed", errorKind: said["errorKind"] as string });
      assert.equal(ran.code, verdict.exitCode, ran.stdout + ran.stderr);
      assert.equal(said["outcome"], verdict.outcome);
      seen.push([said["status"], said["errorKind"], ran.code]);
    }
    assert.deepEqual(seen, [
      ["failed", "invalid_request", 1],
      ["failed", "auth", 3],
      ["failed", "bad_cwd", 2],
    ]);
  } finally {
    await testRig.dispose();
  }
});
