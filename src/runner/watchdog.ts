// One detached POSIX-sh watchdog per host process (works under dash) ends the trees of the host's
// runs if the host dies. It does not poll: it blocks reading a pipe whose only writer is the host.
// The host writes one line whenever its set of runs changes: every run, space separated.
// End of file means the host is gone, however it died (SIGKILL included: the kernel closes the
// pipe). Then, for each run of the last line, it collects the tree from /proc (the ppid walk from the
// CLI, shared process groups/sessions, the run's marker variable) and the processes in the run's
// cgroup, sends TERM, and KILLs what is left after the grace period; last it kills whatever is still
// in the runs' cgroups (found there whatever they did to their session or environment) and removes
// them. A run is `cli:start:marker:grace[:cgroup…]`: the run's own cgroup, then those holding its
// limits (limits.ts), whose processes count as the run's too.
//
// Earlier versions started a watchdog per run that polled once a second. Spawning it meant forking
// a large process on every run, and every poll cost CPU for every run; on a busy worker that was
// more than the rest of a turn's bookkeeping. Waking at the moment the host dies
// finds the same tree: the CLIs are still alive then (they are detached), so their descendants are
// found through them, and the processes that left (`setsid`, `nohup`, reparented) carry the marker.
import { spawn, type ChildProcess } from "node:child_process";
import { Socket } from "node:net";
import { processStartTime, TREE_MARKER_VAR } from "./process-tree.ts";

export const WATCHDOG_SCRIPT = String.raw`
self=$$; runs=
while read -r line; do runs=$line; done
[ -n "$runs" ] || exit 0
# The host is gone: gather every run's tree, then TERM, wait, KILL; then kill and remove the runs' cgroups.
clis=; pats=; cgs=; grace=1; ifs=$IFS
for r in $runs; do
  IFS=:; set -- $r; IFS=$ifs
  [ -n "$2" ] && clis="$clis $1:$2"
  pats="$pats -e ${TREE_MARKER_VAR}=$3"
  [ "$4" -gt "$grace" ] 2>/dev/null && grace=$4
  [ "$#" -gt 4 ] && shift 4 && for c in "$@"; do cgs="$cgs $c"; done
done
# Prints the process groups of the CLIs (as -pgid) and every member of their trees. Pids wrap (on
# some hosts within seconds), so a CLI counts only while its pid still has the recorded start time,
# checked in every collect: a pid reused during the grace period is never signalled. The processes
# in the runs' cgroups are members whatever their session or environment.
collect() {
  marked=$(grep -lzxF $pats /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/##; s#/environ$##' | tr '\n' ' ')
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v clis="$clis" -v marked="$marked" -v self="$self" '
    { pid = $1; sub(/^.*\) /, ""); if ($1 == "Z" || $1 == "X") next
      n++; P[n] = pid; PP[n] = $2; PG[n] = $3; SI[n] = $4; ST[pid] = $20
      if (pid == self) { xs = $4; xg = $3 } }
    END {
      k = split(clis, c, " ")
      for (i = 1; i <= k; i++) { split(c[i], f, ":"); if ((f[1] in ST) && ST[f[1]] == f[2]) { m[f[1]] = 1; lead[f[1]] = 1 } }
      k = split(marked, s, " ")
      for (i = 1; i <= k; i++) if (s[i] in ST) m[s[i]] = 1
      do {
        changed = 0; delete g
        for (i = 1; i <= n; i++) if (P[i] in m) { if (PG[i] != xg && PG[i] > 1) g[PG[i]] = 1; if (SI[i] != xs && SI[i] > 1) g[SI[i]] = 1 }
        for (i = 1; i <= n; i++) {
          p = P[i]; if (p in m || p <= 1 || p == self) continue
          if ((PP[i] in m) || (PG[i] in g) || (SI[i] in g)) { m[p] = 1; changed = 1 }
        }
      } while (changed)
      out = ""; for (p in lead) out = out " -" p; for (p in m) out = out " " p; print out
    }'
  for d in $cgs; do cat "$d/cgroup.procs" 2>/dev/null; done
}
# Kills every process in a run's cgroup at once: cgroup v2 has cgroup.kill; a v1 freezer cgroup is
# frozen first (then none of its processes can fork), its processes SIGKILLed, then thawed.
cgkill() {
  if [ -e "$1/cgroup.kill" ]; then echo 1 > "$1/cgroup.kill"; return; fi
  [ -e "$1/freezer.state" ] || return
  echo FROZEN > "$1/freezer.state"
  n=0
  while [ "$(cat "$1/freezer.state")" != FROZEN ] && [ "$n" -lt 20 ]; do sleep 0.05; n=$((n + 1)); done
  kill -KILL $(cat "$1/cgroup.procs") 2>/dev/null
  echo THAWED > "$1/freezer.state"
}
# Kills and removes the runs' cgroups (a killed process takes a moment to leave), then this host's
# folder that held them.
finish() {
  for d in $cgs; do [ -d "$d" ] && cgkill "$d" 2>/dev/null; done
  for d in $cgs; do
    n=0
    while [ -d "$d" ] && ! rmdir "$d" 2>/dev/null && [ "$n" -lt 30 ]; do cgkill "$d" 2>/dev/null; sleep 0.1; n=$((n + 1)); done
    rmdir "$(dirname "$d")" 2>/dev/null
  done
  exit 0
}
# The grace period is a timer started the moment the host is gone, not a count of rounds: on a busy
# host one collect can take longer than the whole grace period, and counting rounds of it let a run's
# tree outlive its host by seconds. When it runs out, the cgroups go first (at once, whatever is in
# them), then whatever else the last collect finds.
sleep "$((grace / 10)).$((grace % 10))" & timer=$!
known=$(collect)
kill -TERM $known 2>/dev/null
while kill -0 "$timer" 2>/dev/null; do
  known=$(collect)
  [ -z "$(echo $known)" ] && { kill "$timer" 2>/dev/null; finish; }
  sleep 0.1
done
for d in $cgs; do [ -d "$d" ] && cgkill "$d" 2>/dev/null; done
known=$(collect)
kill -KILL $known 2>/dev/null
finish
`;

export interface WatchdogHandle {
  /** The host's watchdog process (shared by all of its runs). */
  pid: number | undefined;
  /** The run's CLI is spawned (announced before, by marker and cgroups): its pid joins the run's entry. */
  started(cliPid: number): void;
  /** The run is over: the watchdog forgets it. */
  stop(): void;
}

/** One run as the watchdog's line lists it: `cli:start:marker:grace[:cgroup…]` (cli, start empty before the spawn). */
export function watchdogEntry(run: WatchedRun): string {
  const start = run.cliPid === undefined ? "" : (processStartTime(run.cliPid) ?? "");
  const grace = Math.max(1, Math.ceil(run.killGraceMs / 100));
  const cgroups = [...(run.cgroup === undefined ? [] : [run.cgroup]), ...(run.limitCgroups ?? [])];
  return `${run.cliPid ?? ""}:${start}:${run.marker}:${grace}${cgroups.map((c) => `:${c}`).join("")}`;
}

/** What the watchdog needs of a run. */
export interface WatchedRun {
  /** Undefined while the run is announced before its spawn: its marker and cgroups already name it. */
  cliPid?: number | undefined;
  marker: string;
  killGraceMs: number;
  /** The run's own cgroup. */
  cgroup?: string | undefined;
  /** The cgroups holding its limits beyond its own (v1 hierarchies), removed with it. */
  limitCgroups?: readonly string[] | undefined;
}

class HostWatchdog {
  readonly #shell: string;
  readonly #runs = new Map<number, string>();
  #child: ChildProcess | undefined;
  #next = 0;

  constructor(shell: string) {
    this.#shell = shell;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  watch(entry: string): number {
    const id = this.#next++;
    this.#runs.set(id, entry);
    this.#publish();
    return id;
  }

  update(id: number, entry: string): void {
    if (this.#runs.has(id)) {
      this.#runs.set(id, entry);
      this.#publish();
    }
  }

  forget(id: number): void {
    if (this.#runs.delete(id)) this.#publish();
  }

  #publish(): void {
    const child = this.#child ?? this.#start();
    child.stdin!.write(`${[...this.#runs.values()].join(" ")}\n`);
  }

  #start(): ChildProcess {
    const child = spawn(this.#shell, ["-c", WATCHDOG_SCRIPT, "turnstream-watchdog"], {
      // Its own session, no marker in its env (it must never find itself), nothing inherited but PATH.
      // stdin is the pipe it waits on; our end is close-on-exec, so no other process holds it open.
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
    });
    child.on("error", () => {});
    child.stdin!.on("error", () => {});
    // Killed from outside while we live: the next change starts a new one with the full list.
    child.once("exit", () => {
      if (this.#child === child) this.#child = undefined;
      if (this.#runs.size > 0)
        queueMicrotask(() => this.#child === undefined && this.#runs.size > 0 && this.#publish());
    });
    // The watchdog must never keep the host's event loop alive.
    child.unref();
    // A piped stdin is a net.Socket, whose handle would hold the loop open too.
    if (child.stdin instanceof Socket) child.stdin.unref();
    this.#child = child;
    return child;
  }
}

const watchdogs = new Map<string, HostWatchdog>();

/**
 * Watches one run with the host's watchdog (started on first use, one per shell). Called before the
 * CLI's spawn (without `cliPid`), the run is known to the watchdog before any of its processes
 * exists: a host killed between the spawn and `started` still leaves a watchdog that finds the run
 * by its marker and cgroups.
 */
export function startWatchdog(opts: WatchedRun & { shell?: string }): WatchdogHandle {
  const shell = opts.shell ?? "/bin/sh";
  let wd = watchdogs.get(shell);
  if (wd === undefined) watchdogs.set(shell, (wd = new HostWatchdog(shell)));
  const id = wd.watch(watchdogEntry(opts));
  let stopped = false;
  return {
    pid: wd.pid,
    started(cliPid) {
      if (!stopped) wd.update(id, watchdogEntry({ ...opts, cliPid }));
    },
    stop() {
      if (stopped) return;
      stopped = true;
      wd.forget(id);
    },
  };
}
