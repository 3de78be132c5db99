// A host process for the watchdog tests: runs one turn, prints {cli, marker, watchdog, cgroup,
// containment} as JSON once the Bash background sleepers exist, then waits to be killed (or exits as
// told by HOST_MODE). HOST_CONTAINMENT picks the containment kind instead of the best one.
// HOST_MODE=spawn prints the moment the run is started instead; HOST_MODE=spawned prints the CLI's
// pid and marker and SIGKILLs the host the instant the CLI's spawn returns, before anything else of
// the run. HOST_WARM=1 runs the turn in a warm process (startWarmProcess) rather than a cold run.
import childProcess from "node:child_process";
import { writeSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { runTurn, selectContainment, startWatchdog, type ContainmentKind } from "../../src/runner/index.ts";
import { startWarmProcess } from "../../src/runner/warm-process.ts";
import type { RunLimits } from "../../src/runner/limits.ts";
import { hermeticEnv } from "./_support.ts";

const url = process.env["MODEL_URL"]!;
const mode = process.env["HOST_MODE"] ?? "wait"; // wait | spawn | spawned | dash | exit | throw
const kind = process.env["HOST_CONTAINMENT"];
if (kind !== undefined) selectContainment([kind as ContainmentKind]);
if (mode === "spawned") dieRightAfterTheCliSpawn();

const options = {
  cwd: process.env["RUN_CWD"]!,
  skipPermissions: true,
  sandboxed: true,
  env: hermeticEnv(url),
  killGraceMs: Number(process.env["HOST_KILL_GRACE_MS"] ?? 500),
  watchdog: mode === "wait" || mode === "spawn" || mode === "spawned",
  limits: process.env["HOST_LIMITS"] === undefined ? undefined : (JSON.parse(process.env["HOST_LIMITS"]) as RunLimits),
};
const warm = process.env["HOST_WARM"] === "1";
const turnRun = warm ? warmRun() : runTurn({ ...options, prompt: "run it" });
let watchdog = turnRun.watchdogPid;
if (mode === "dash") {
  watchdog = startWatchdog({
    cliPid: turnRun.pid!,
    marker: turnRun.treeMarker,
    killGraceMs: 500,
    cgroup: turnRun.cgroup,
    shell: "/usr/bin/dash",
  }).pid;
}
turnRun.outcome.catch(() => {});
const info = (): string => {
  const { pid: cli, treeMarker: marker, cgroup, limitCgroups, containment } = turnRun;
  return JSON.stringify({ cli, marker, watchdog, cgroup, limitCgroups, containment });
};
if (mode === "spawn") process.stdout.write(info() + "\n");
for await (const line of turnRun.lines) {
  if (mode !== "spawn" && line.type === "user" && line.raw.includes("started")) {
    process.stdout.write(info() + "\n");
    if (mode === "exit") process.exit(0);
    if (mode === "throw")
      setImmediate(() => {
        throw new Error("host crashed");
      });
  }
}

/** The turn in a warm process, for the spawn modes: its tree and outcome (no lines; its cgroup is not reported). */
type Run = ReturnType<typeof runTurn>;
type HostRun = Pick<Run, "pid" | "treeMarker" | "watchdogPid" | "cgroup" | "limitCgroups" | "containment" | "outcome"> &
  Pick<Run, "lines">;
function warmRun(): HostRun {
  const warmProcess = startWarmProcess(options);
  const outcome = warmProcess.turn("run it");
  const lines: Run["lines"] = (async function* () {})();
  const tree = { cgroup: undefined, limitCgroups: [], containment: "proc-walk" as const };
  return { pid: warmProcess.pid, treeMarker: warmProcess.treeMarker, watchdogPid: undefined, ...tree, outcome, lines };
}

/**
 * Wraps child_process.spawn (runTurn's live ESM binding follows through syncBuiltinESMExports): the
 * spawn that carries the run's tree marker prints the child's pid and marker, then SIGKILLs this
 * process at once, before the caller sees the child.
 */
function dieRightAfterTheCliSpawn(): void {
  const real = childProcess.spawn;
  childProcess.spawn = ((file: string, args: readonly string[], opts: childProcess.SpawnOptions) => {
    const child = real(file, args, opts);
    const marker = opts?.env?.["TURNSTREAM_TREE"];
    if (marker !== undefined) {
      // The run's cgroup, as the launcher enters it (`echo $$ > '<cgroup>/cgroup.procs'`).
      const cgroup = /'([^']+)\/cgroup\.procs'/.exec(args.join(" "))?.[1];
      writeSync(1, JSON.stringify({ cli: child.pid, marker, cgroup }) + "\n");
      process.kill(process.pid, "SIGKILL");
    }
    return child;
  }) as typeof childProcess.spawn;
  syncBuiltinESMExports();
}
