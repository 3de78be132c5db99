// The host dies or exits mid-turn: nothing of the CLI's tree may survive (checked in /proc).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readlinkSync } from "node:fs";
import { alive, cmdline, SETTLE_MS, startHost as startHostWith, treeMembers, waitUntil } from "../runner/_support.ts";

const SLEEPERS = "nohup sleep 300 >/dev/null 2>&1 & setsid sleep 301 >/dev/null 2>&1 & echo started";
const startHost = (mode: string): ReturnType<typeof startHostWith> => startHostWith(mode, SLEEPERS);

async function assertTreeDies(marker: string, cli: number, timeoutMs: number): Promise<void> {
  await waitUntil(
    () =>
      treeMembers(marker).filter((p) => /^sleep 30[01]$/.test(cmdline(p))).length === 2 ||
      treeMembers(marker).length === 0,
    SETTLE_MS,
    "sleepers",
  );
  await waitUntil(() => treeMembers(marker).length === 0 && !alive(cli), timeoutMs, "the CLI tree to be gone");
}

test("/bin/sh is dash here, so the default watchdog runs under dash", () => {
  assert.match(readlinkSync("/bin/sh"), /dash$/);
});

for (const mode of ["wait", "dash"] as const) {
  test(`host SIGKILLed mid-turn: the watchdog (${mode === "wait" ? "runTurn's, /bin/sh" : "explicit /usr/bin/dash"}) kills the tree incl. reparented sleepers`, async () => {
    const { host, info, exited } = await startHost(mode);
    assert.ok(info.watchdog !== undefined && alive(info.watchdog));
    // Read before the kill: the watchdog wakes the moment the host is gone and may end the CLI
    // before this test could look again.
    const before = treeMembers(info.marker);
    assert.ok(before.includes(info.cli), "the CLI is in its tree before the host dies");
    const sleepers = before.filter((p) => p !== info.cli);
    assert.ok(sleepers.length > 0, "background processes exist before the host dies");
    host.kill("SIGKILL");
    await exited;
    // The watchdog wakes when the host dies: TERM, then KILL after 0.5 s (how soon on a busy host:
    // cli-watchdog-load.test.ts).
    await assertTreeDies(info.marker, info.cli, SETTLE_MS);
    assert.ok(sleepers.every((p) => !alive(p)));
    await waitUntil(() => !alive(info.watchdog!), SETTLE_MS, "the watchdog to exit");
    if (info.cgroup !== undefined)
      assert.equal(existsSync(info.cgroup), false, "the watchdog removed the run's cgroup");
  });
}

for (const mode of ["exit", "throw"] as const) {
  test(`host ${mode === "exit" ? "calls process.exit" : "dies of an uncaught exception"} mid-turn (no watchdog): its exit hook SIGKILLs the tree`, async () => {
    const { info, exited } = await startHost(mode);
    assert.equal(await exited, mode === "exit" ? 0 : 1);
    // No watchdog here: only the synchronous exit hook can have done this.
    await waitUntil(
      () => treeMembers(info.marker).length === 0 && !alive(info.cli),
      SETTLE_MS,
      "the CLI tree to be gone",
    );
    // The exit hook waited for the killed processes to leave the run's cgroup, then removed it.
    if (info.cgroup !== undefined)
      assert.equal(existsSync(info.cgroup), false, "the exit hook removed the run's cgroup");
  });
}
