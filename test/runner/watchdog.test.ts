// The watchdog on its own, with plain `sleep` processes standing in for CLIs: one process serves
// every run of the host, waits without polling, forgets runs that ended, ends the trees of the runs
// it still knows when its pipe closes, and never takes a pid that now names another process.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname } from "node:path";
import { launchCommand, RunCgroup, selectContainment } from "../../src/runner/containment.ts";
import { startWatchdog, TREE_MARKER_VAR, WATCHDOG_SCRIPT, watchdogEntry } from "../../src/runner/index.ts";
import {
  alive,
  escapeCommands,
  escapeNonce,
  escapees,
  killEscapees,
  SETTLE_MS,
  startTree,
  waitUntil,
} from "./_support.ts";

function fakeCli(marker: string): number {
  // Detached: its own process group, as the CLI leads its own.
  const child = spawn("sleep", ["60"], {
    detached: true,
    stdio: "ignore",
    env: { PATH: process.env["PATH"]!, [TREE_MARKER_VAR]: marker },
  });
  child.unref();
  return child.pid!;
}

/** /proc/<pid>/stat fields after `comm` (so [0] is the state, [1] the ppid, [19] the start time). */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  return stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
}

/** CPU ticks (user + system, its own and its reaped children's) of a process. */
function cpuTicks(pid: number): number {
  const fields = statFields(pid);
  return Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
}

const childrenOf = (pid: number): number[] =>
  readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .filter((procEntry) => {
      try {
        return statFields(Number(procEntry))[1] === String(pid);
      } catch {
        return false;
      }
    })
    .map(Number);

test("one watchdog serves every run of the host; while it waits it runs nothing and uses no CPU", async () => {
  const markers = [randomUUID(), randomUUID()];
  const clis = markers.map(fakeCli);
  const handles = clis.map((cliPid, i) => startWatchdog({ cliPid, marker: markers[i]!, killGraceMs: 200 }));
  try {
    assert.ok(handles[0]!.pid !== undefined && alive(handles[0]!.pid));
    assert.equal(handles[1]!.pid, handles[0]!.pid, "the second run shares the first one's watchdog");
    await new Promise((r) => setTimeout(r, 300));
    const before = cpuTicks(handles[0]!.pid!);
    await new Promise((r) => setTimeout(r, 2200));
    assert.deepEqual(childrenOf(handles[0]!.pid!), [], "no polling processes");
    assert.ok(cpuTicks(handles[0]!.pid!) - before <= 1, "no CPU while it waits");
    for (const handle of handles) handle.stop();
    assert.ok(clis.every(alive), "stopping a run touches nothing");
  } finally {
    for (const cliPid of clis) process.kill(cliPid, "SIGKILL");
  }
});

/** Runs the script as a host would, sends `lines`, then closes the pipe as a dying host does. */
async function hostDies(lines: string[]): Promise<void> {
  const wd = spawn("/bin/sh", ["-c", WATCHDOG_SCRIPT, "wd"], { detached: true, stdio: ["pipe", "ignore", "ignore"] });
  for (const entryLine of lines) wd.stdin.write(`${entryLine}\n`);
  wd.stdin.end();
  await new Promise((r) => wd.once("exit", r));
}

test("the pipe closes (the host died): the runs of the last line die, a run already forgotten does not", async () => {
  const [m1, m2] = [randomUUID(), randomUUID()];
  const [c1, c2] = [fakeCli(m1), fakeCli(m2)];
  try {
    const e1 = watchdogEntry({ cliPid: c1, marker: m1, killGraceMs: 200 });
    const e2 = watchdogEntry({ cliPid: c2, marker: m2, killGraceMs: 200 });
    await hostDies([e1, `${e1} ${e2}`, e2]);
    await waitUntil(() => !alive(c2), SETTLE_MS, "the watched CLI to die");
    assert.equal(alive(c1), true, "the forgotten run is left alone");
  } finally {
    for (const cliPid of [c1, c2]) if (alive(cliPid)) process.kill(cliPid, "SIGKILL");
  }
});

test("a CLI pid that now names another process (start time differs) is left alone", async () => {
  const marker = randomUUID();
  const cli = fakeCli(marker);
  try {
    // A different marker, so only the pid could lead the watchdog to it.
    await hostDies([`${cli}:1:${randomUUID()}:2`]);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(alive(cli), true);
    assert.equal(statFields(cli)[19] !== "1", true);
  } finally {
    process.kill(cli, "SIGKILL");
  }
});

test("a run found by its marker alone dies too (its CLI pid gone stale)", async () => {
  const marker = randomUUID();
  const member = fakeCli(marker);
  try {
    await hostDies([`999999:1:${marker}:2`]);
    await waitUntil(() => !alive(member), SETTLE_MS, "the marked process to die");
  } finally {
    if (alive(member)) process.kill(member, "SIGKILL");
  }
});

test("a CLI that still has its recorded start time takes its whole process group along, unmarked members too", async () => {
  const root = spawn("sh", ["-c", "sleep 60 & echo started; wait"], {
    detached: true,
    stdio: ["ignore", "pipe", "ignore"],
    env: { PATH: process.env["PATH"]! },
  });
  await new Promise<void>((resolve) => root.stdout!.once("data", () => resolve()));
  const sleeper = childrenOf(root.pid!)[0]!;
  try {
    assert.ok(sleeper !== undefined && alive(sleeper));
    await hostDies([watchdogEntry({ cliPid: root.pid!, marker: randomUUID(), killGraceMs: 200 })]);
    await waitUntil(() => !alive(root.pid!) && !alive(sleeper), SETTLE_MS, "the CLI and its group to die");
  } finally {
    for (const survivor of [root.pid!, sleeper])
      if (survivor !== undefined && alive(survivor)) process.kill(survivor, "SIGKILL");
  }
});

for (const kind of ["cgroup-v2", "cgroup-v1-freezer"] as const) {
  test(`${kind}: the pipe closes: the run's cgroup is killed (escaped processes included) and removed`, async (testContext) => {
    const selection = selectContainment([kind]);
    if (selection.kind !== kind)
      return testContext.skip(selection.skipped.find((s) => s.kind === kind)?.reason ?? "not offered");
    const marker = randomUUID();
    const nonce = escapeNonce();
    const cgroup = RunCgroup.create(selection, marker);
    const root = await startTree(marker, {
      script: `${escapeCommands(nonce)}; sleep 60 & echo started; wait`,
      launch: (file, args) => launchCommand(selection, cgroup, file, args),
    });
    try {
      await waitUntil(() => escapees(nonce).length === 2, SETTLE_MS, "both escaped sleepers");
      assert.match(
        watchdogEntry({ cliPid: root.pid!, marker, killGraceMs: 200, cgroup: cgroup.path }),
        /^\d+:\d+:[0-9a-f-]+:2:\/sys\/fs\/cgroup\/.+$/,
      );
      // Another run of the same host still holds the host's folder: only the dead run's cgroup goes.
      const other = RunCgroup.create(selection, randomUUID());
      await hostDies([watchdogEntry({ cliPid: root.pid!, marker, killGraceMs: 200, cgroup: cgroup.path })]);
      assert.deepEqual(escapees(nonce), [], "the escaped sleepers are dead when the watchdog exits");
      assert.equal(alive(root.pid!), false);
      assert.equal(existsSync(cgroup.path), false, "the run's cgroup is removed");
      assert.equal(existsSync(dirname(cgroup.path)), true, "the host's folder stays while another run uses it");
      assert.equal(other.remove(), true);
    } finally {
      killEscapees(nonce);
      if (alive(root.pid!)) process.kill(-root.pid!, "SIGKILL");
    }
  });
}

const announced = "a run announced before its spawn (no pid yet) is ended by its marker";
test(`${announced}; what ignores TERM is KILLed once the grace runs out`, async () => {
  const marker = randomUUID();
  const entry = watchdogEntry({ marker, killGraceMs: 800 });
  assert.equal(entry, `::${marker}:8`, "no pid and no start time until the spawn returned");
  // TERM ignored, and the disposition survives the exec: only the KILL at the end of the grace ends it.
  const env = { PATH: process.env["PATH"]!, [TREE_MARKER_VAR]: marker };
  const proof = spawn("/bin/sh", ["-c", "trap '' TERM; exec sleep 60"], { detached: true, stdio: "ignore", env });
  proof.unref();
  const runsSleep = (): boolean => readFileSync(`/proc/${proof.pid}/cmdline`, "latin1").startsWith("sleep");
  await waitUntil(runsSleep, SETTLE_MS, "the sleep to run");
  try {
    const diedAt = Date.now();
    await hostDies([entry]);
    // The KILL is sent before the watchdog exits; the process is gone moments after, not at once.
    await waitUntil(() => !alive(proof.pid!), 2000, "the sleep KILLed by the watchdog");
    assert.ok(Date.now() - diedAt >= 800, "not before the grace period ran out");
  } finally {
    if (alive(proof.pid!)) process.kill(proof.pid!, "SIGKILL");
  }
});
