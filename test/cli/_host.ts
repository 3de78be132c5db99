// A host process for the watchdog tests: runs one turn, prints {cli, marker, watchdog} as JSON once
// the Bash background sleepers exist, then waits to be killed (or exits as told by HOST_MODE).
import { runTurn, startWatchdog } from "../../src/cli/index.ts";
import { hermeticEnv } from "./_support.ts";

const url = process.env["MODEL_URL"]!;
const mode = process.env["HOST_MODE"] ?? "wait"; // wait | dash | exit | throw
const h = runTurn({
  cwd: process.env["RUN_CWD"]!,
  prompt: "run it",
  skipPermissions: true,
  sandboxed: true,
  env: hermeticEnv(url),
  killGraceMs: 500,
  watchdog: mode === "wait",
});
let watchdog = h.watchdogPid;
if (mode === "dash") {
  watchdog = startWatchdog({ cliPid: h.pid!, marker: h.treeMarker, killGraceMs: 500, shell: "/usr/bin/dash" }).pid;
}
h.outcome.catch(() => {});
for await (const l of h.lines) {
  if (l.type === "user" && l.raw.includes("started")) {
    process.stdout.write(JSON.stringify({ cli: h.pid, marker: h.treeMarker, watchdog }) + "\n");
    if (mode === "exit") process.exit(0);
    if (mode === "throw") setImmediate(() => {
      throw new Error("host crashed");
    });
  }
}
