// SIGKILL after killGraceMs, with the real CLI: a member of the run's tree that ignores SIGTERM is
// still alive after the TERM went out, is gone once killGraceMs has passed (not before), and the
// outcome settles only then. The Bash tool leaves two processes behind it: `sleep 60.N` with SIGTERM
// ignored (`trap '' TERM`, checked in /proc/<pid>/status), and a witness shell that traps TERM, notes
// it in a file and carries on; the note is the event "TERM has been sent to the tree" (every member
// gets it in the same synchronous pass), so no step here waits a fixed time.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError, runTurn, type RunTurnOptions, type TurnHandle } from "../../src/runner/index.ts";
import { startScriptedServer, type Step } from "../runner/_model.ts";
import { alive, cmdline, escapeNonce, hermeticEnv, treeMembers, waitUntil } from "../runner/_support.ts";

const GRACE = 2000;

/** Bit of SIGTERM (15) in /proc/<pid>/status's SigIgn mask. */
function ignoresTerm(pid: number): boolean {
  const match = /^SigIgn:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, "latin1"));
  return match !== null && (BigInt(`0x${match[1]}`) & (1n << 14n)) !== 0n;
}

/** Resolves once `cond` holds, re-checking every 20 ms; rejects after `timeoutMs`. */
async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<number> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Date.now();
}

interface Rig {
  handle: TurnHandle;
  cwd: string;
  /** The TERM-ignoring `sleep 60.N`. */
  stubborn: number;
  /** The shell that notes TERM in `witness` and keeps running. */
  witnessFile: string;
  witnessPid: number;
  /** Every live member of the run's tree once the tool's processes run. */
  before: number[];
  drain: Promise<void>;
  /** The raw result line, once printed. */
  result(): string;
  close(): Promise<void>;
}

/** One real turn whose Bash call leaves the two TERM-surviving processes, then `after` (hang or a reply). */
async function turnLeavingStubbornChild(after: Step, extra: Partial<RunTurnOptions>): Promise<Rig> {
  const nonce = escapeNonce();
  const cwd = mkdtempSync(join(tmpdir(), "ts-grace-"));
  const witnessFile = join(cwd, "term-seen");
  const command =
    `(trap '' TERM; exec sleep 60.${nonce}) >/dev/null 2>&1 & ` +
    `(trap 'echo TERM >> ${witnessFile}' TERM; while :; do sleep 0.1; done) >/dev/null 2>&1 & ` +
    `echo started`;
  const server = await startScriptedServer([
    { tool: { name: "Bash", input: { command, description: "stubborn children" } } },
    after,
  ]);
  // Retries on: the model server closes an idle keep-alive connection after Node's default 5 s, and
  // a loaded machine can take that long for the Bash call, so the next request may meet a reset.
  const env = { ...hermeticEnv(server.url), CLAUDE_CODE_MAX_RETRIES: "2" };
  const handle = runTurn({
    cwd,
    prompt: "run it",
    skipPermissions: true,
    sandboxed: true,
    env,
    killGraceMs: GRACE,
    ...extra,
  });
  const it = handle.lines[Symbol.asyncIterator]();
  let lastRaw = "";
  for (;;) {
    const step = await it.next();
    assert.equal(step.done, false, "the tool's result line comes before the end");
    if (step.value.type === "user" && step.value.raw.includes("started")) break;
  }
  const drain = (async () => {
    for (let step = await it.next(); step.done !== true; step = await it.next())
      if (step.value.type.startsWith("result")) lastRaw = step.value.raw;
  })();
  const stubbornOf = (): number | undefined =>
    treeMembers(handle.treeMarker).find((p) => cmdline(p) === `sleep 60.${nonce}`);
  const witnessOf = (): number | undefined =>
    treeMembers(handle.treeMarker).find((p) => p !== handle.pid && hasTermTrap(p));
  await until(
    () => stubbornOf() !== undefined && witnessOf() !== undefined,
    5000,
    "the stubborn sleeper and the witness shell",
  );
  const stubborn = stubbornOf()!;
  return {
    handle,
    cwd,
    stubborn,
    witnessFile,
    witnessPid: witnessOf()!,
    before: treeMembers(handle.treeMarker),
    drain,
    result: () => lastRaw,
    async close() {
      for (const member of treeMembers(handle.treeMarker)) {
        try {
          process.kill(member, "SIGKILL");
        } catch {
          // gone meanwhile
        }
      }
      await server.close();
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}

/** A bash that has a TERM handler installed (SigCgt bit 15): the witness, not the tool's own shell. */
function hasTermTrap(pid: number): boolean {
  try {
    const match = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, "latin1"));
    return (
      match !== null &&
      (BigInt(`0x${match[1]}`) & (1n << 14n)) !== 0n &&
      readFileSync(`/proc/${pid}/cmdline`, "latin1").startsWith("/bin/bash")
    );
  } catch {
    return false;
  }
}

const termSeen = (r: Rig): boolean =>
  existsSync(r.witnessFile) && readFileSync(r.witnessFile, "latin1").includes("TERM");

/** The outcome, or a rejection if it has not settled within `ms` (a tree nobody kills never settles). */
function settled<T>(promise: Promise<T>, ms = GRACE + 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`the outcome did not settle within ${ms} ms`)), ms)),
  );
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

async function failure(handle: TurnHandle): Promise<ClaudeCodeCliError> {
  const err = await settled(handle.outcome).then(
    () => assert.fail("expected the outcome to reject"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ClaudeCodeCliError, String(err));
  return err;
}

test("kill(): the CLI exits on TERM, a child that ignores TERM outlives it and is SIGKILLed once killGraceMs has passed", async () => {
  const setup = await turnLeavingStubbornChild({ hang: true }, {});
  try {
    assert.ok(ignoresTerm(setup.stubborn), "the sleeper has SIGTERM ignored");
    assert.equal(existsSync(setup.witnessFile), false, "no TERM before the kill");
    let settledAt = 0;
    void setup.handle.outcome.then(
      () => (settledAt = Date.now()),
      () => (settledAt = Date.now()),
    );
    const killedAt = Date.now();
    setup.handle.kill();
    await until(() => termSeen(setup), GRACE, "the witness to note the TERM");
    await settled(setup.handle.exited);
    assert.equal(alive(setup.handle.pid!), false, "the CLI itself acted on TERM");
    assert.ok(
      alive(setup.stubborn),
      "the TERM-ignoring sleeper is still alive after the TERM (and after the CLI exited)",
    );
    assert.ok(alive(setup.witnessPid), "the witness survived the TERM it noted");
    const goneAt = await until(
      () => !alive(setup.stubborn) && !alive(setup.witnessPid),
      GRACE + 5000,
      "the stubborn processes to be killed",
    );
    assert.ok(goneAt - killedAt >= GRACE, `killed after ${goneAt - killedAt} ms, not before killGraceMs=${GRACE}`);
    const err = await failure(setup.handle);
    assert.equal(err.kind, "killed");
    // The real CLI handles TERM and exits 143 itself; the escalation was only needed for the child.
    assert.equal(err.exitCode, 143);
    assert.equal(err.signal, null);
    assert.ok(settledAt - killedAt >= GRACE, `the outcome waited for the grace (${settledAt - killedAt} ms)`);
    await until(() => treeMembers(setup.handle.treeMarker).length === 0, 2000, "nothing of the tree left");
    if (setup.handle.cgroup !== undefined)
      assert.equal(existsSync(setup.handle.cgroup), false, "the run's cgroup is removed");
  } finally {
    await setup.close();
  }
});

test("abort signal, with the CLI itself not acting on TERM (stopped): the whole tree, CLI included, is SIGKILLed after killGraceMs; the error says SIGKILL", async () => {
  const ac = new AbortController();
  const setup = await turnLeavingStubbornChild({ hang: true }, { signal: ac.signal });
  try {
    const cli = setup.handle.pid!;
    // A stopped process keeps a TERM pending and does nothing about it; only SIGKILL ends it.
    process.kill(cli, "SIGSTOP");
    await until(() => /\) T /.test(readFileSync(`/proc/${cli}/stat`, "latin1")), 2000, "the CLI to be stopped");
    const abortedAt = Date.now();
    ac.abort();
    await until(() => termSeen(setup), GRACE, "the witness to note the TERM");
    assert.ok(alive(cli), "the CLI is still there after the TERM");
    assert.ok(alive(setup.stubborn), "the TERM-ignoring sleeper is still alive after the TERM");
    const err = await failure(setup.handle);
    const settledAt = Date.now();
    assert.equal(err.kind, "aborted");
    assert.equal(err.signal, "SIGKILL", "the CLI died of the escalation's SIGKILL");
    assert.equal(err.exitCode, null);
    assert.ok(
      settledAt - abortedAt >= GRACE,
      `the outcome came ${settledAt - abortedAt} ms after the abort, not before killGraceMs=${GRACE}`,
    );
    assert.ok(settledAt - abortedAt < GRACE + 5000, "and not long after it");
    await until(() => [cli, setup.stubborn, setup.witnessPid].every((p) => !alive(p)), 2000, "the tree to be gone");
    assert.deepEqual(treeMembers(setup.handle.treeMarker), []);
  } finally {
    try {
      process.kill(setup.handle.pid!, "SIGCONT");
    } catch {
      // gone
    }
    await setup.close();
  }
});

test("a turn that ends normally but leaves a child that ignores TERM: the reap SIGKILLs it after killGraceMs, then the outcome resolves", async () => {
  const setup = await turnLeavingStubbornChild({ text: "done" }, {});
  try {
    await settled(setup.handle.exited);
    const exitedAt = Date.now();
    assert.ok(setup.before.includes(setup.stubborn));
    // After the CLI's exit the reap sends TERM to what it left.
    await until(() => termSeen(setup), GRACE, "the witness to note the reap's TERM");
    assert.ok(alive(setup.stubborn), "the TERM-ignoring sleeper is still alive after the reap's TERM");
    const outcome = await settled(setup.handle.outcome).catch(async (thrown: unknown) => {
      await setup.drain;
      return assert.fail(`${String(thrown)}; result line: ${setup.result().slice(0, 2000)}`);
    });
    const settledAt = Date.now();
    assert.equal(outcome.resultText, "done");
    assert.equal(outcome.exitCode, 0);
    // The reap's grace starts at the CLI's exit, which this test sees a little later on a loaded host.
    const observationLagMs = 250;
    assert.ok(
      settledAt - exitedAt >= GRACE - observationLagMs,
      `the outcome waited ${settledAt - exitedAt} ms for the reap, about killGraceMs=${GRACE}`,
    );
    assert.ok(settledAt - exitedAt < GRACE + 5000, "and not long after it");
    await until(() => !alive(setup.stubborn) && !alive(setup.witnessPid), 2000, "the stubborn processes to be gone");
    assert.deepEqual(treeMembers(setup.handle.treeMarker), []);
  } finally {
    await setup.close();
  }
});
