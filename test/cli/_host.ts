// A host process for the watchdog tests: runs one turn, prints {cli, marker, watchdog, cgroup,
// containment} as JSON once the Bash background sleepers exist, then waits to be killed (or exits as
// told by HOST_MODE). HOST_CONTAINMENT picks the containment kind instead of the best one.
import { runTurn, selectContainment, startWatchdog, type ContainmentKind } from "../../src/cli/index.ts";
import type { RunLimits } from "../../src/cli/limits.ts";
import { hermeticEnv } from "./_support.ts";

const url = process.env["MODEL_URL"]!;
const mode = process.env["HOST_MODE"] ?? "wait"; // wait | dash | exit | throw
const kind = process.env["HOST_CONTAINMENT"];
if (kind !== undefined) selectContainment([kind as ContainmentKind]);
const h = runTurn({
  cwd: process.env["RUN_CWD"]!,
  prompt: "run it",
  skipPermissions: true,
  sandboxed: true,
  env: hermeticEnv(url),
  killGraceMs: 500,
  watchdog: mode === "wait",
  limits: process.env["HOST_LIMITS"] === undefined ? undefined : (JSON.parse(process.env["HOST_LIMITS"]) as RunLimits),
});
let watchdog = h.watchdogPid;
if (mode === "dash") {
  watchdog = startWatchdog({ cliPid: h.pid!, marker: h.treeMarker, killGraceMs: 500, cgroup: h.cgroup, shell: "/usr/bin/dash" }).pid;
}
h.outcome.catch(() => {});
for await (const l of h.lines) {
  if (l.type === "user" && l.raw.includes("started")) {
    const info = { cli: h.pid, marker: h.treeMarker, watchdog, cgroup: h.cgroup, limitCgroups: h.limitCgroups, containment: h.containment };
    process.stdout.write(JSON.stringify(info) + "\n");
    if (mode === "exit") process.exit(0);
    if (mode === "throw") setImmediate(() => {
      throw new Error("host crashed");
    });
  }
}
