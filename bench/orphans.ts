// Hosts SIGKILLed while their Bash tool sleeps, on a busy machine (two CPU hogs), cold and warm in
// turn: per round three hosts die at once; the time from the kill until nothing of their runs is
// alive (the /proc marker scan) and their cgroups are removed. `npm run bench -- orphans [rounds]`.
// Ratio = the slowest round's time to gone / the grace period (the watchdog KILLs at the grace's end).
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { readMounts } from "../src/runner/containment.ts";
import { cmdline, escapeNonce, startHost, treeMembers, waitUntil } from "../test/runner/_support.ts";

const ROUNDS = Number(process.argv[2] ?? 6);
const GRACE_MS = 2000;
const HOSTS = 3;

function cgroupOf(pid: number): string | undefined {
  const line = readFileSync(`/proc/${pid}/cgroup`, "latin1")
    .split("\n")
    .find((l) => l.startsWith("0::"));
  const mount = readMounts().find((m) => m.fstype === "cgroup2" && m.root === "/");
  return line === undefined || mount === undefined || line === "0::/" ? undefined : join(mount.point, line.slice(3));
}

async function round(warm: boolean): Promise<{ goneMs: number; aliveAt5s: number }> {
  const nonce = escapeNonce();
  const env = { HOST_KILL_GRACE_MS: String(GRACE_MS), HOST_WARM: warm ? "1" : "0" };
  const command = (i: number): string => `echo go; sleep 600.${nonce}${i}; echo done`;
  const hosts = await Promise.all(Array.from({ length: HOSTS }, (_, i) => startHost("spawn", command(i), env)));
  const sleepOf = (i: number): number | undefined =>
    treeMembers(hosts[i]!.info.marker).find((p) => cmdline(p) === `sleep 600.${nonce}${i}`);
  await waitUntil(() => hosts.every((_, i) => sleepOf(i) !== undefined), 90_000, "the Bash tools' sleeps");
  const cgroups = hosts.map((h, i) => h.info.cgroup ?? cgroupOf(sleepOf(i)!)).filter((c) => c !== undefined);
  const loop = "const e = Date.now() + 12000; while (Date.now() < e) {}";
  const hogs = [0, 1].map(() => spawn(process.execPath, ["-e", loop], { stdio: "ignore" }));
  try {
    await new Promise((r) => setTimeout(r, 300));
    const killedAt = Date.now();
    for (const spawned of hosts) spawned.host.kill("SIGKILL");
    const left = (): number[] => hosts.flatMap((h) => treeMembers(h.info.marker));
    let aliveAt5s = -1;
    while (left().length > 0 || cgroups.some((c) => existsSync(c))) {
      if (aliveAt5s === -1 && Date.now() - killedAt >= 5000) aliveAt5s = left().length;
      if (Date.now() - killedAt > 30_000) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const goneMs = Date.now() - killedAt;
    for (const leftPid of left()) process.kill(leftPid, "SIGKILL");
    return { goneMs, aliveAt5s: Math.max(aliveAt5s, 0) };
  } finally {
    for (const hog of hogs) hog.kill("SIGKILL");
  }
}

const results: Array<{ warm: boolean; goneMs: number; aliveAt5s: number }> = [];
for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex++) {
  const warm = roundIndex % 2 === 1;
  const result = await round(warm);
  results.push({ warm, ...result });
  console.log(
    `round ${roundIndex + 1} ${warm ? "warm" : "cold"}: gone after ${result.goneMs} ms, alive at 5 s: ${result.aliveAt5s}`,
  );
}
const maxGoneMs = Math.max(...results.map((r) => r.goneMs));
const aliveAt5s = results.reduce((n, r) => n + r.aliveAt5s, 0);
const ratio = Number((maxGoneMs / GRACE_MS).toFixed(2));
console.log(JSON.stringify({ bench: "orphans", ratio, rounds: ROUNDS, graceMs: GRACE_MS, maxGoneMs, aliveAt5s }));
