// runTurn against the real CLI and a scripted loopback model server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError, LostSessionError, runTurn, type RunTurnOptions } from "../../src/runner/index.ts";
import type { ParsedLine } from "../../src/protocol/index.ts";
import { startScriptedServer, type Step } from "../runner/_model.ts";
import { alive, cmdline, hermeticEnv, treeMembers, waitUntil, withGrowingDeadline } from "../runner/_support.ts";

async function withServer<T>(
  script: Step[],
  fn: (url: string, server: Awaited<ReturnType<typeof startScriptedServer>>) => Promise<T>,
): Promise<T> {
  const server = await startScriptedServer(script);
  try {
    return await fn(server.url, server);
  } finally {
    await server.close();
  }
}

const cwdDir = (): string => mkdtempSync(join(tmpdir(), "ts-cwd-"));

test("streams lines as printed, prompt on stdin only, result settles the outcome, nothing left running", async () => {
  await withServer([{ text: "four" }], async (url, server) => {
    const prompt = "What is 2+2? secret-prompt-marker";
    const handle = runTurn({ cwd: cwdDir(), prompt, env: hermeticEnv(url) });
    assert.ok(handle.pid !== undefined);
    assert.equal(cmdline(handle.pid).includes("secret-prompt-marker"), false);
    const seen: ParsedLine[] = [];
    let aliveAtFirstLine: boolean | undefined;
    let outcomeFirst = false;
    void handle.outcome.then(() => (outcomeFirst = true));
    let exitedFirst = false;
    const exited = handle.exited.then(() => {
      exitedFirst = !outcomeFirst;
      return alive(handle.pid!);
    });
    for await (const parsed of handle.lines) {
      aliveAtFirstLine ??= alive(handle.pid);
      seen.push(parsed);
    }
    const outcome = await handle.outcome;
    assert.equal(aliveAtFirstLine, true, "the first line arrives while the CLI still runs");
    assert.equal(await exited, false, "`exited` settles once the CLI process is gone");
    assert.ok(exitedFirst, "`exited` settles before the outcome");
    assert.ok(seen.some((l) => l.type === "system/init"));
    assert.equal(seen.at(-1)?.type, "result/success");
    assert.equal(outcome.resultText, "four");
    assert.match(outcome.sessionId ?? "", /^[0-9a-f-]{36}$/);
    assert.equal(outcome.lineCount, seen.length);
    assert.equal(outcome.exitCode, 0);
    assert.equal(outcome.auth, "inherited");
    assert.ok(JSON.stringify(server.requests()[0]).includes("secret-prompt-marker"));
    assert.deepEqual(treeMembers(handle.treeMarker), []);
    assert.ok(
      handle.watchdogPid !== undefined && alive(handle.watchdogPid),
      "the host's watchdog stays for the next run",
    );
  });
});

test("API error: result envelope decides (kind, status), message has no stderr", async () => {
  await withServer(
    [{ error: { status: 401, type: "authentication_error", message: "invalid x-api-key" } }],
    async (url) => {
      const handle = runTurn({ cwd: cwdDir(), prompt: "hi", env: hermeticEnv(url) });
      const err = await handle.outcome.then(
        () => assert.fail("expected failure"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ClaudeCodeCliError);
      assert.equal(err.kind, "auth");
      assert.equal(err.apiErrorStatus, 401);
      assert.equal(err.retryable, false);
      assert.equal(Object.keys(err).includes("stderr"), false);
      assert.ok(err.stderr === "" || !err.message.includes(err.stderr));
    },
  );
});

test("resume of an unknown session is a LostSessionError", async () => {
  await withServer([{ text: "never" }], async (url, server) => {
    const handle = runTurn({
      cwd: cwdDir(),
      prompt: "hi",
      resume: "6f1c1e0e-0000-4000-8000-000000000000",
      threadId: "t-1",
      env: hermeticEnv(url),
    });
    const err = await handle.outcome.then(
      () => assert.fail("expected failure"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof LostSessionError);
    assert.equal(err.sessionId, "6f1c1e0e-0000-4000-8000-000000000000");
    assert.equal(err.threadId, "t-1");
    assert.equal(err.exitCode, 1);
    assert.equal(server.requests().length, 0);
  });
});

const SLEEPERS = "nohup sleep 300 >/dev/null 2>&1 & setsid sleep 301 >/dev/null 2>&1 & sleep 302 & echo started";

const SLEEPERS_THEN_HANG: Step[] = [
  { tool: { name: "Bash", input: { command: SLEEPERS, description: "start sleepers" } } },
  { hang: true },
];

/**
 * Starts a turn whose Bash call leaves background sleepers, then the model hangs. `sleepers` is
 * undefined when the run ended before all three were seen (a deadline that fired first).
 */
async function hungTurnWithSleepers(
  url: string,
  extra: Partial<RunTurnOptions>,
): Promise<{ handle: ReturnType<typeof runTurn>; sleepers: number[] | undefined }> {
  const handle = runTurn({
    cwd: cwdDir(),
    prompt: "run it",
    skipPermissions: true,
    sandboxed: true,
    env: hermeticEnv(url),
    killGraceMs: 1000,
    ...extra,
  });
  let ended = false;
  void handle.outcome.then(
    () => (ended = true),
    () => (ended = true),
  );
  const it = handle.lines[Symbol.asyncIterator]();
  for (;;) {
    const next = await it.next();
    if (next.done === true) return { handle, sleepers: undefined };
    if (next.value.type === "user" && next.value.raw.includes("started")) break;
  }
  // The shell forks them before they exec `sleep`: wait until all three are sleeping.
  const find = (): number[] => treeMembers(handle.treeMarker).filter((p) => /^sleep 30[012]$/.test(cmdline(p)));
  await waitUntil(() => find().length === 3 || ended, 60_000, "three background sleepers");
  const sleepers = find();
  void (async () => {
    for (let next = await it.next(); next.done !== true; next = await it.next());
  })();
  return { handle, sleepers: sleepers.length === 3 ? sleepers : undefined };
}

type Ending = "inactivity" | "timeout" | "aborted" | "killed";

/**
 * One turn ended by `ending`: its kind is that ending and its whole tree is gone. False when a
 * deadline fired before the sleepers were seen, which leaves the check of the sleepers untried.
 */
async function treeEnds(ending: Ending, extra: Partial<RunTurnOptions>, ac: AbortController): Promise<boolean> {
  return withServer(SLEEPERS_THEN_HANG, async (url) => {
    const { handle, sleepers } = await hungTurnWithSleepers(url, extra);
    if (sleepers !== undefined && ending === "aborted") ac.abort();
    if (sleepers !== undefined && ending === "killed") handle.kill();
    const err = await handle.outcome.then(
      () => assert.fail("expected failure"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ClaudeCodeCliError);
    assert.equal(err.kind, ending);
    await waitUntil(() => [handle.pid!, ...(sleepers ?? [])].every((p) => !alive(p)), 15_000, "tree gone");
    assert.deepEqual(treeMembers(handle.treeMarker), []);
    return sleepers !== undefined;
  });
}

for (const mode of ["inactivity", "timeout", "aborted", "killed"] as const) {
  test(`${mode}: the whole tree ends, Bash background sleepers included (checked in /proc)`, async () => {
    const ac = new AbortController();
    if (mode === "inactivity") await withGrowingDeadline(4000, (ms) => treeEnds(mode, { inactivityTimeoutMs: ms }, ac));
    else if (mode === "timeout") await withGrowingDeadline(8000, (ms) => treeEnds(mode, { timeoutMs: ms }, ac));
    else {
      const extra = mode === "aborted" ? { signal: ac.signal } : {};
      assert.equal(await treeEnds(mode, extra, ac), true, "three background sleepers before the end");
    }
  });
}
