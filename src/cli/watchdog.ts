// A detached POSIX-sh watchdog per run (works under dash). Once a second it checks the host and the
// CLI; while both live it refreshes its own list of the CLI's tree from /proc (ppid walk, shared
// process groups/sessions, the run's marker variable), so if the host dies it can still find Bash-tool
// children that were reparented meanwhile. Host gone → TERM the tree, KILL after the grace period.
// CLI gone → exit.
import { spawn } from "node:child_process";
import { TREE_MARKER_VAR } from "./process-tree.ts";

// Arguments: $1 host pid, $2 CLI pid, $3 marker value, $4 grace in tenths of a second.
export const WATCHDOG_SCRIPT = String.raw`
host=$1; cli=$2; mark="${TREE_MARKER_VAR}=$3"; grace=$4; self=$$
hoststart=$(awk '{ sub(/^.*\) /, ""); print $20 }' /proc/$host/stat 2>/dev/null)
known="$cli"
collect() {
  marked=$(grep -lzxF -e "$mark" /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/##; s#/environ$##' | tr '\n' ' ')
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v seeds="$known $marked" -v self="$self" '
    { pid = $1; sub(/^.*\) /, ""); if ($1 == "Z" || $1 == "X") next
      n++; P[n] = pid; PP[n] = $2; PG[n] = $3; SI[n] = $4; alive[pid] = 1
      if (pid == self) { xs = $4; xg = $3 } }
    END {
      k = split(seeds, s, " ")
      for (i = 1; i <= k; i++) if (s[i] in alive) m[s[i]] = 1
      do {
        changed = 0; delete g
        for (i = 1; i <= n; i++) if (P[i] in m) { if (PG[i] != xg && PG[i] > 1) g[PG[i]] = 1; if (SI[i] != xs && SI[i] > 1) g[SI[i]] = 1 }
        for (i = 1; i <= n; i++) {
          p = P[i]; if (p in m || p <= 1 || p == self) continue
          if ((PP[i] in m) || (PG[i] in g) || (SI[i] in g)) { m[p] = 1; changed = 1 }
        }
      } while (changed)
      out = ""; for (p in m) out = out " " p; print out
    }'
}
hostalive() {
  [ -n "$hoststart" ] || return 1
  now=$(awk '{ sub(/^.*\) /, ""); print $20 }' /proc/$host/stat 2>/dev/null)
  [ "$now" = "$hoststart" ]
}
killtree() {
  known=$(collect)
  kill -TERM -"$cli" $known 2>/dev/null
  i=0
  while [ "$i" -lt "$grace" ]; do
    known=$(collect)
    [ -z "$(echo $known)" ] && exit 0
    sleep 0.1
    i=$((i + 1))
  done
  known=$(collect)
  kill -KILL -"$cli" $known 2>/dev/null
  exit 0
}
while :; do
  hostalive || killtree
  [ -d /proc/$cli ] || exit 0
  grep -q '^State:[[:space:]]*Z' /proc/$cli/status 2>/dev/null && exit 0
  known=$(collect)
  sleep 1
done
`;

export interface WatchdogHandle {
  pid: number | undefined;
  stop(): void;
}

export function startWatchdog(opts: { hostPid: number; cliPid: number; marker: string; killGraceMs: number; shell?: string }): WatchdogHandle {
  const tenths = Math.max(1, Math.ceil(opts.killGraceMs / 100));
  const child = spawn(
    opts.shell ?? "/bin/sh",
    ["-c", WATCHDOG_SCRIPT, "turnstream-watchdog", String(opts.hostPid), String(opts.cliPid), opts.marker, String(tenths)],
    // Its own session, no marker in its env (it must never find itself), nothing inherited but PATH.
    { detached: true, stdio: "ignore", env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" } },
  );
  child.on("error", () => {});
  child.unref();
  return {
    pid: child.pid,
    stop() {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    },
  };
}
