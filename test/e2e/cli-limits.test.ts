// A turn's limits against the real CLI, its Bash tool playing the attacker: a fork storm, an
// allocation past the memory limit, files past the scratch limit (in the run's TMPDIR and outside
// it), a command that outlives the wall time. Each turn fails with its own kind, nothing of its tree
// is left, its cgroups and its scratch (the per-run config home) are gone. CPU is throttled, not failed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError, runTurn, type TurnHandle } from "../../src/runner/index.ts";
import { LimitExceededError } from "../../src/runner/errors.ts";
import { readMounts } from "../../src/runner/containment.ts";
import { describeLimits, limitSupport, type RunLimits } from "../../src/runner/limits.ts";
import { startScriptedServer } from "../runner/_model.ts";
import { alive, cmdline, escapeNonce, hermeticEnv, startHost, waitUntil } from "../runner/_support.ts";

const MiB = 1024 * 1024;

/** Live processes whose command line carries the turn's nonce (its sleeps are `sleep 300.<nonce>`). */
function noncePids(nonce: string): number[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => cmdline(pid).includes(`300.${nonce}`) && alive(pid));
}

/** A long sleep marked with the nonce (through sh: the CLI's Bash tool refuses a standalone long sleep). */
const sleeper = (nonce: string): string => `sh -c "sleep 300.${nonce}"`;

interface ToolCall {
  name: string;
  input: Record<string, unknown>;
}

interface LimitedTurn {
  handle: TurnHandle;
  error: unknown;
  /** The turn's tool output lines, as the CLI printed them. */
  toolOutput: string;
  cwd: string;
  homeDir: string;
}

/**
 * One real turn whose Bash tool runs `command` (or whose one tool call is `tool`, given the workspace),
 * under `limits`, with a per-run config home (its scratch).
 */
async function limitedTurn(command: string, limits: RunLimits, tool?: (cwd: string) => ToolCall): Promise<LimitedTurn> {
  const root = mkdtempSync(join(tmpdir(), "ts-limits-"));
  const cwd = join(root, "ws");
  mkdirSync(cwd);
  mkdirSync(join(root, "operator"));
  const call = tool?.(cwd) ?? { name: "Bash", input: { command, description: "x", timeout: 600000 } };
  const server = await startScriptedServer([{ tool: call }, { text: "done" }]);
  try {
    const handle = runTurn({
      cwd,
      prompt: "go",
      skipPermissions: true,
      sandboxed: true,
      env: hermeticEnv(server.url, join(root, "env")),
      killGraceMs: 500,
      limits,
      configHome: { instanceId: "limits", instanceRoot: join(root, "inst"), operatorConfigDir: join(root, "operator") },
    });
    let toolOutput = "";
    for await (const parsed of handle.lines) if (parsed.type === "user") toolOutput += parsed.raw;
    const error = await handle.outcome.then(
      () => undefined,
      (err: unknown) => err,
    );
    return { handle, error, toolOutput, cwd, homeDir: handle.configHome!.dir };
  } finally {
    await server.close();
  }
}

/** The turn failed with `kind`, nothing of it runs, its cgroup and its scratch are gone. */
async function assertEnded(turn: LimitedTurn, kind: string, nonce: string): Promise<void> {
  assert.ok(turn.error instanceof LimitExceededError, `a limit error, got ${String(turn.error)}`);
  const err = turn.error as ClaudeCodeCliError;
  assert.equal(err.kind, kind, err.message);
  assert.equal(err.retryable, false);
  assert.deepEqual(noncePids(nonce), [], "no process of the turn is alive once its outcome settled");
  for (const cgroup of [turn.handle.cgroup, ...turn.handle.limitCgroups]) {
    if (cgroup !== undefined) assert.equal(existsSync(cgroup), false, `the run's cgroup ${cgroup} is removed`);
  }
  assert.equal(existsSync(turn.homeDir), false, "the run's config home (its TMPDIR) is gone from config-homes");
  // Teardown moves the home to the instance's trash and deletes it there right after.
  const trash = join(turn.homeDir, "..", "..", "trash");
  await waitUntil(
    () => !existsSync(trash) || readdirSync(trash).length === 0,
    20_000,
    "the run's scratch to be deleted",
  );
}

test("this host's limits: pids and memory are the kernel's (a cgroup per run)", () => {
  const support = limitSupport();
  assert.ok(support.places.pids !== undefined, `pids: ${support.missing.pids}`);
  assert.ok(support.places.memory !== undefined, `memory: ${support.missing.memory}`);
  const lines = describeLimits(support);
  assert.deepEqual(
    lines.map((l) => l.limit),
    ["pids", "memory", "cpu", "disk", "duration"],
  );
  assert.equal(lines.find((l) => l.limit === "pids")!.enforced, "kernel");
});

test("pids: a Bash tool that starts 100 sleeps under a limit of 40 tasks fails limit_pids, its tree ended", async () => {
  const nonce = escapeNonce();
  const turn = await limitedTurn(`for i in $(seq 100); do ${sleeper(nonce)} & done; wait`, { pids: 40 });
  await assertEnded(turn, "limit_pids", nonce);
  assert.match((turn.error as Error).message, /limit of 40 tasks/);
});

test("pids: forks that leave the session and the environment (setsid -f env -i) still count against the limit", async () => {
  const nonce = escapeNonce();
  // dash gives up on a refused fork at once; the tool returns and the CLI goes on, the turn still fails.
  const escape = `for i in $(seq 60); do setsid -f env -i sh -c "sleep 300.${nonce}" || break; done; echo forked`;
  const turn = await limitedTurn(`sh -c '${escape}'`, { pids: 40 });
  await assertEnded(turn, "limit_pids", nonce);
});

test("memory: a Bash tool that buffers 2 GiB under a limit of 300 MiB fails limit_memory, its tree ended", async () => {
  const nonce = escapeNonce();
  // tail keeps a line without a newline in memory: the whole 2 GiB, past the limit long before.
  const command = `${sleeper(nonce)} & head -c 2000M /dev/zero | tail | wc -c; wait`;
  const turn = await limitedTurn(command, { memoryBytes: 300 * MiB });
  await assertEnded(turn, "limit_memory", nonce);
});

test("disk: files past the scratch limit: one outside the scratch is capped, the scratch filled fails limit_disk", async () => {
  const nonce = escapeNonce();
  const command =
    `head -c 100M /dev/zero > "$PWD/outside.bin"; ` +
    `head -c 20M /dev/zero > "$TMPDIR/a.bin"; head -c 20M /dev/zero > "$TMPDIR/b.bin"; ${sleeper(nonce)}`;
  const turn = await limitedTurn(command, { scratchBytes: 32 * MiB });
  await assertEnded(turn, "limit_disk", nonce);
  // RLIMIT_FSIZE: the write outside the scratch stopped at the limit (the writer got SIGXFSZ).
  assert.equal(statSync(join(turn.cwd, "outside.bin")).size, 32 * MiB);
});

test("disk: the CLI's own Write tool past the file cap kills the CLI (SIGXFSZ): limit_disk, not a retried no_result", async () => {
  // No config home: the scratch is a TMPDIR made for the run, and the file goes to the workspace,
  // which only the file cap bounds.
  const cwd = mkdtempSync(join(tmpdir(), "ts-limits-write-"));
  const write = { name: "Write", input: { file_path: join(cwd, "big.txt"), content: "a".repeat(300_000) } };
  const server = await startScriptedServer([{ tool: write }, { text: "done" }]);
  try {
    const env = hermeticEnv(server.url);
    const handle = runTurn({
      cwd,
      prompt: "go",
      skipPermissions: true,
      sandboxed: true,
      env,
      limits: { scratchBytes: 100_000 },
    });
    const error = await handle.outcome.then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(error instanceof LimitExceededError, String(error));
    assert.equal(error.kind, "limit_disk");
    assert.match(error.message, /the CLI wrote a file past the limit of 100000 bytes \(SIGXFSZ\)/);
    // The CLI writes through a temporary file: whatever it left is within the cap.
    for (const name of readdirSync(cwd))
      assert.ok(statSync(join(cwd, name)).size <= 100_000, `${name} is within the cap`);
  } finally {
    await server.close();
  }
});

test("duration: a Bash tool that sleeps past the wall-time limit fails limit_duration, not retried like a timeout", async () => {
  const nonce = escapeNonce();
  const started = Date.now();
  const turn = await limitedTurn(sleeper(nonce), { durationMs: 4000 });
  await assertEnded(turn, "limit_duration", nonce);
  assert.ok(Date.now() - started < 60_000, "ended at the limit, not at the sleep's end");
});

test("cpu: a busy loop under a limit of 0.1 CPU is throttled, and the turn finishes", async () => {
  const cpu = limitSupport().places.cpu;
  if (cpu === undefined) {
    // Then doctor must say CPU is not bounded here.
    assert.equal(describeLimits().find((l) => l.limit === "cpu")!.enforced, "none");
    return;
  }
  // The tool's own cgroup, as /proc/self/cgroup names it, under the mount of the hierarchy holding cpu
  // (a hierarchy mounted at its root, as on a host; in a container the mount's root is the container's).
  const v2 = cpu.version === "v2";
  const mount = readMounts().find((m) => (v2 ? m.fstype === "cgroup2" : m.superOptions.includes("cpu")))!;
  const where = `${mount.point}$(awk -F: '${v2 ? '$1=="0"' : "$2~/(^|,)cpu(,|$)/"}{print $3}' /proc/self/cgroup)`;
  const command = `timeout 2 sh -c 'while :; do :; done'; cat ${where}/cpu.stat`;
  const turn = await limitedTurn(command, { cpus: 0.1 });
  assert.equal(turn.error, undefined, String(turn.error));
  const throttled = /nr_throttled (\d+)/.exec(turn.toolOutput);
  assert.ok(throttled !== null && Number(throttled[1]) > 0, `the loop was throttled: ${turn.toolOutput.slice(0, 400)}`);
});

test("host SIGKILLed mid-turn: the watchdog ends the run and removes its limit cgroups with its own", async () => {
  const nonce = escapeNonce();
  const limits: RunLimits = { pids: 200, memoryBytes: 512 * MiB, cpus: 1 };
  const command = `${sleeper(nonce)} & echo started`;
  const { host, info, exited } = await startHost("wait", command, { HOST_LIMITS: JSON.stringify(limits) });
  try {
    const held = info.limitCgroups ?? [];
    const v1 = Object.values(limitSupport().places).filter((p) => p.version === "v1");
    assert.ok(v1.length > 0 && held.length > 0, "this host holds the limits in v1 cgroups");
    await waitUntil(() => noncePids(nonce).length > 0, 10_000, "the sleeper");
    host.kill("SIGKILL");
    await exited;
    await waitUntil(() => noncePids(nonce).length === 0 && !alive(info.cli), 15_000, "the run to die");
    for (const dir of [info.cgroup, ...held]) {
      if (dir !== undefined) await waitUntil(() => !existsSync(dir), 10_000, `${dir} to be removed`);
    }
  } finally {
    if (host.exitCode === null) host.kill("SIGKILL");
  }
});
