// Hosts SIGKILLed on a busy machine (a CPU hog for the test's duration), cold runs and warm
// processes alike: one host dies the instant its CLI's spawn returns (before anything else of the
// run happened in it), two while their Bash tool sleeps. Within the grace period and a little more
// after the kill, nothing of any run may be alive (the CLI, the tool's sleep, anything carrying the
// run's marker), and the run's cgroup is gone. Rounds with more hogs and a fixed bound:
// `npm run bench -- orphans`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { readMounts } from "../../src/runner/containment.ts";
import { cmdline, escapeNonce, startHost, treeMembers, waitUntil } from "../runner/_support.ts";

/** The worker's default grace between TERM and KILL. */
const GRACE_MS = 2000;
/**
 * What the watchdog may take beyond the grace: wake-up, one /proc scan, the kills, on a busy host. A
 * host loaded beyond this test's own hog slows every scan: the slack then grows with a scan's time,
 * measured here, but stays well below the grace counted in scan rounds, which this bound is for.
 */
const SLACK_MS = 2000;
const SLACK_PER_SCAN_MS = 10;

/** The longest of a few /proc scans for `left`, the way the watchdog scans, in ms. */
function scanMs(left: () => number[]): number {
  let longest = 0;
  for (let scan = 0; scan < 3; scan++) {
    const started = performance.now();
    left();
    longest = Math.max(longest, performance.now() - started);
  }
  return longest;
}

/** Busy-loop processes, each ending by itself after `ms` (so a failed test leaves no hog behind). */
function hogs(count: number, ms: number): ChildProcess[] {
  const loop = `const end = Date.now() + ${ms}; while (Date.now() < end) {}`;
  return Array.from({ length: count }, () => spawn(process.execPath, ["-e", loop], { stdio: "ignore" }));
}

/** The cgroup v2 a process is in (a warm host does not report its run's cgroup). */
function v2CgroupOf(pid: number): string | undefined {
  const line = readFileSync(`/proc/${pid}/cgroup`, "latin1")
    .split("\n")
    .find((l) => l.startsWith("0::"));
  const mount = readMounts().find((m) => m.fstype === "cgroup2" && m.root === "/");
  return line === undefined || mount === undefined || line === "0::/" ? undefined : join(mount.point, line.slice(3));
}

for (const warm of [false, true]) {
  const name = `${warm ? "warm" : "cold"} runs on a busy host: hosts SIGKILLed at the spawn and mid-tool leave nothing`;
  test(`${name} after the grace period`, async () => {
    const busy = hogs(1, 30_000);
    const nonce = escapeNonce();
    const env = { HOST_KILL_GRACE_MS: String(GRACE_MS), HOST_WARM: warm ? "1" : "0" };
    const command = (i: number): string => `echo go; sleep 600.${nonce}${i}; echo done`;
    const hosts: Array<Awaited<ReturnType<typeof startHost>>> = [];
    try {
      const atSpawn = await startHost("spawned", command(0), env);
      const midTool = await Promise.all([1, 2].map((i) => startHost("spawn", command(i), env)));
      hosts.push(atSpawn, ...midTool);
      const sleepOf = (h: (typeof hosts)[number], i: number): number | undefined =>
        treeMembers(h.info.marker).find((p) => cmdline(p) === `sleep 600.${nonce}${i}`);
      await waitUntil(() => midTool.every((h, i) => sleepOf(h, i + 1) !== undefined), 60_000, "the Bash tools' sleeps");
      const cgroups = [atSpawn.info.cgroup, ...midTool.map((h, i) => h.info.cgroup ?? v2CgroupOf(sleepOf(h, i + 1)!))];
      assert.ok(
        cgroups.every((c) => c !== undefined),
        `every run has a cgroup: ${JSON.stringify(cgroups)}`,
      );
      const left = (): number[] => hosts.flatMap((h) => treeMembers(h.info.marker));
      const slackMs = Math.max(SLACK_MS, SLACK_PER_SCAN_MS * scanMs(left));
      const killedAt = Date.now();
      for (const hostRun of midTool) hostRun.host.kill("SIGKILL");
      await Promise.all(hosts.map((h) => h.exited));

      const deadline = GRACE_MS + slackMs - (Date.now() - killedAt);
      const what = "every run's processes to be gone";
      await waitUntil(() => left().length === 0, Math.max(deadline, 0), what).catch((err: unknown) => {
        const alive = left().map((p) => `${p} ${cmdline(p).slice(0, 60)}`);
        throw new Error(`${(err as Error).message} (slack ${Math.round(slackMs)} ms): ${alive.join(" | ")}`);
      });
      await waitUntil(() => cgroups.every((c) => !existsSync(c!)), 15_000, "the runs' cgroups to be removed");
    } finally {
      for (const hog of busy) hog.kill("SIGKILL");
      for (const hostRun of hosts) hostRun.host.kill("SIGKILL");
      for (const hostRun of hosts)
        for (const member of treeMembers(hostRun.info.marker)) process.kill(member, "SIGKILL");
    }
  });
}
