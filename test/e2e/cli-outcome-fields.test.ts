// What runTurn fills in from real runs of the CLI: the result envelope's subtype, errors and
// terminal_reason, and the exit code and signal, for a success, a max-turns stop, an API error, an
// interrupt (SIGINT: the CLI usually still prints a result) and a CLI killed by a signal. Values are the ones
// the pinned CLI prints: a change in the CLI or in how runTurn copies
// them fails here. The one fake CLI stands in for what the real one never does: die of SIGTERM (it
// handles TERM and exits 143, see cli-kill-grace.test.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError, runTurn, type RunTurnOptions, type TurnHandle } from "../../src/runner/index.ts";
import type { ModelServer } from "../../src/testing/index.ts";
import { startScriptedServer, type Step } from "../runner/_model.ts";
import { hermeticEnv, waitUntil } from "../runner/_support.ts";

async function withServer<T>(script: Step[], fn: (server: ModelServer) => Promise<T>): Promise<T> {
  const server = await startScriptedServer(script);
  try {
    return await fn(server);
  } finally {
    await server.close();
  }
}

const turn = (server: ModelServer, extra: Partial<RunTurnOptions> = {}): TurnHandle =>
  runTurn({
    cwd: mkdtempSync(join(tmpdir(), "ts-fields-")),
    prompt: "go",
    skipPermissions: true,
    sandboxed: true,
    env: hermeticEnv(server.url),
    ...extra,
  });

async function failure(handle: TurnHandle): Promise<ClaudeCodeCliError> {
  const err = await handle.outcome.then(
    () => assert.fail("expected the outcome to reject"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ClaudeCodeCliError, String(err));
  return err;
}

/** The last result line the CLI printed, as runTurn streamed it. */
async function lastResult(handle: TurnHandle): Promise<Record<string, unknown> | undefined> {
  let result: Record<string, unknown> | undefined;
  for await (const parsed of handle.lines)
    if ((parsed.category === "known" || parsed.category === "unknown") && parsed.line["type"] === "result")
      result = parsed.line;
  return result;
}

/** Resolves once the model server holds the turn's first Messages request (the CLI is streaming). */
const modelAsked = (s: ModelServer): Promise<void> =>
  waitUntil(() => s.requests().some((r) => r.kind === "messages"), 20_000, "the CLI's first Messages request");

const bash = (command: string): Step => ({ tool: { name: "Bash", input: { command, description: "step" } } });

test("success: exit 0, no signal; the outcome's result carries subtype success and terminal_reason completed", async () => {
  await withServer([{ text: "four" }], async (server) => {
    const handle = turn(server);
    const printed = await lastResult(handle);
    const outcome = await handle.outcome;
    assert.equal(outcome.exitCode, 0);
    assert.equal(outcome.signal, null);
    assert.equal(outcome.result["subtype"], "success");
    assert.equal(outcome.result["terminal_reason"], "completed");
    assert.equal(outcome.result["is_error"], false);
    assert.deepEqual(outcome.result, printed, "the outcome's result is the printed result line");
    assert.equal(outcome.resultText, "four");
  });
});

test("maxTurns 1 with a script that keeps calling tools: kind max_turns, subtype error_max_turns, the CLI's errors list, terminalReason max_turns", async () => {
  await withServer(
    [bash("echo one"), bash("echo two"), bash("echo three"), { text: "never reached" }],
    async (server) => {
      // Retries on for the request after the Bash call (see cli-kill-grace.test.ts: an idle keep-alive
      // connection the model server closes after 5 s); no other test here makes a second request.
      const handle = turn(server, { maxTurns: 1, env: { ...hermeticEnv(server.url), CLAUDE_CODE_MAX_RETRIES: "2" } });
      const printed = await lastResult(handle);
      const err = await failure(handle);
      assert.equal(err.kind, "max_turns");
      assert.equal(err.subtype, "error_max_turns");
      assert.deepEqual(err.errors, ["Reached maximum number of turns (1)"]);
      assert.equal(err.terminalReason, "max_turns");
      assert.equal(err.exitCode, 1);
      assert.equal(err.signal, null);
      assert.equal(err.apiErrorStatus, undefined);
      assert.equal(printed?.["subtype"], err.subtype, "copied from the printed result line");
      assert.deepEqual(printed?.["errors"], [...err.errors]);
      assert.match(err.message, /max_turns \[error_max_turns\]/);
      assert.equal(Object.isFrozen(err.errors), true);
    },
  );
});

test("API error 500: the CLI's subtype (success, with is_error) and terminal_reason api_error are copied, errors empty, status 500", async () => {
  await withServer([{ error: { status: 500, type: "api_error", message: "boom" } }], async (server) => {
    const handle = turn(server);
    const printed = await lastResult(handle);
    const err = await failure(handle);
    assert.equal(err.kind, "server_error");
    assert.equal(printed?.["is_error"], true);
    assert.equal(err.subtype, "success");
    assert.equal(err.terminalReason, "api_error");
    assert.deepEqual(err.errors, []);
    assert.equal(err.apiErrorStatus, 500);
    assert.equal(err.exitCode, 1);
    assert.equal(err.signal, null);
  });
});

/** Runs a turn against a stalled stream and interrupts it with SIGINT once the model is asked. */
async function interrupted(): Promise<{ err: ClaudeCodeCliError; printed: Record<string, unknown> | undefined }> {
  return withServer([{ hang: true }], async (server) => {
    const handle = turn(server);
    const printed = lastResult(handle);
    await modelAsked(server);
    process.kill(handle.pid!, "SIGINT");
    const err = await failure(handle);
    return { err, printed: await printed };
  });
}

// The CLI answers SIGINT in one of two ways, by a race inside it that no wait from outside settles:
// usually an error_during_execution result, sometimes only an "[Request interrupted by user]" user
// line and exit 0 with no result. Both are asserted; the result path must show within a few tries.
const SIGINT_TRIES = 6;

test("SIGINT while the model streams: error_during_execution with errors and terminalReason aborted_streaming filled, or no result at all (no_result, exit 0)", async () => {
  for (let attempt = 1; attempt <= SIGINT_TRIES; attempt++) {
    const { err, printed } = await interrupted();
    assert.equal(err.signal, null);
    assert.equal(err.exitCode, 0);
    if (printed === undefined) {
      assert.equal(err.kind, "no_result");
      assert.equal(err.subtype, undefined);
      continue;
    }
    assert.equal(err.kind, "error_result");
    assert.equal(err.subtype, "error_during_execution");
    assert.equal(err.terminalReason, "aborted_streaming");
    assert.ok(
      err.errors.length > 0 && err.errors.every((e) => typeof e === "string" && e.length > 0),
      JSON.stringify(err.errors),
    );
    assert.deepEqual([...err.errors], printed["errors"]);
    return;
  }
  assert.fail(`the CLI printed no result line after SIGINT in ${SIGINT_TRIES} tries`);
});

test("the real CLI SIGKILLed from outside mid-turn: kind no_result, signal SIGKILL, exit code null, no result fields", async () => {
  await withServer([{ hang: true }], async (server) => {
    const handle = turn(server);
    void lastResult(handle);
    await modelAsked(server);
    process.kill(handle.pid!, "SIGKILL");
    const err = await failure(handle);
    assert.equal(err.kind, "no_result");
    assert.equal(err.signal, "SIGKILL");
    assert.equal(err.exitCode, null);
    assert.equal(err.subtype, undefined);
    assert.equal(err.terminalReason, undefined);
    assert.deepEqual(err.errors, []);
    assert.match(err.message, /exit null, SIGKILL/);
  });
});

test("kill() of a CLI that dies of the TERM itself (stand-in; the real CLI exits 143): signal SIGTERM, exit code null", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ts-fields-fake-"));
  try {
    const bin = join(dir, "fake-claude");
    writeFileSync(
      bin,
      `#!/bin/sh
cat >/dev/null
echo '{"type":"system","subtype":"init","session_id":"fake-session","tools":[],"model":"fake"}'
exec sleep 60
`,
    );
    chmodSync(bin, 0o755);
    const handle = runTurn({ cwd: dir, prompt: "x", claudeBin: bin, killGraceMs: 5000 });
    for await (const parsed of handle.lines) if (parsed.type === "system/init") break;
    handle.kill();
    const err = await failure(handle);
    assert.equal(err.kind, "killed");
    assert.equal(err.signal, "SIGTERM");
    assert.equal(err.exitCode, null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
