// Finding and killing everything a CLI run started. The CLI runs each Bash tool command in a new
// session, and those survive a kill of the CLI's process group (reparented to init). So before any
// kill we collect the tree from /proc: the ppid walk from the CLI, every process sharing a process
// group or session with a member, and every process whose environment carries the run's marker
// variable (inherited by all descendants, so it still finds `setsid`/`nohup` leftovers that were
// reparented before we looked). A process that starts its own session and drops the marker too is
// beyond this walk: containment.ts puts the run in a cgroup where the host allows, and keeps this
// walk as the second net.
import { readdirSync, readFileSync } from "node:fs";

export const TREE_MARKER_VAR = "TURNSTREAM_TREE";

interface ProcStat {
  pid: number;
  ppid: number;
  pgid: number;
  sid: number;
  start: string;
}

function readStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  // comm may contain spaces and parentheses: fields start after the last ") ".
  const rest = text.slice(text.lastIndexOf(") ") + 2).split(" ", 20);
  // A zombie never runs again.
  if (rest[0] === "Z" || rest[0] === "X") return undefined;
  return { pid, ppid: Number(rest[1]), pgid: Number(rest[2]), sid: Number(rest[3]), start: rest[19] ?? "" };
}

/** The process's start time (clock ticks since boot, /proc stat field 22): with the pid, it names one process. */
export function processStartTime(pid: number): string | undefined {
  const st = readStat(pid);
  return st === undefined || st.start === "" ? undefined : st.start;
}

/** Every process /proc lists. */
function readTable(): Map<number, ProcStat> {
  const table = new Map<number, ProcStat>();
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return table;
  }
  for (const name of names) {
    const firstCode = name.charCodeAt(0);
    if (firstCode < 48 || firstCode > 57) continue;
    const st = readStat(Number(name));
    if (st !== undefined) table.set(st.pid, st);
  }
  return table;
}

function carriesMarker(pid: number, marker: Buffer): boolean {
  try {
    const env = readFileSync(`/proc/${pid}/environ`);
    let at = env.indexOf(marker);
    while (at !== -1) {
      const end = at + marker.length;
      if ((at === 0 || env[at - 1] === 0) && (end === env.length || env[end] === 0)) return true;
      at = env.indexOf(marker, at + 1);
    }
    return false;
  } catch {
    return false;
  }
}

const self = readStat(process.pid);

/** One run's process tree: the CLI plus everything it started. */
export class ProcessTree {
  readonly rootPid: number;
  readonly marker: string;
  private readonly markerBytes: Buffer;
  /** The CLI's start time (clock ticks since boot), when it could be read. */
  private readonly rootStart: number | undefined;
  /** pid → start time, so a reused pid is never mistaken for a member. */
  private readonly known = new Map<number, string>();

  constructor(rootPid: number, marker: string) {
    this.rootPid = rootPid;
    this.marker = marker;
    this.markerBytes = Buffer.from(`${TREE_MARKER_VAR}=${marker}`);
    const st = readStat(rootPid);
    if (st !== undefined) this.known.set(rootPid, st.start);
    const start = Number(st?.start);
    this.rootStart = Number.isFinite(start) && st?.start !== "" ? start : undefined;
  }

  /** Re-reads /proc and returns the live members (pids). */
  refresh(): number[] {
    const table = readTable();
    const members = new Set<number>();
    for (const [pid, start] of this.known) {
      if (table.get(pid)?.start === start) members.add(pid);
      else this.known.delete(pid);
    }
    const excludedGroups = new Set<number>([0, 1]);
    if (self !== undefined) {
      excludedGroups.add(self.pgid);
      excludedGroups.add(self.sid);
    }
    const ok = (p: ProcStat): boolean => p.pid > 1 && p.pid !== process.pid;
    // Only a process started since the CLI can carry the run's marker (all of them descend from
    // it), so older ones are not read at all: on a busy host reading every environ was most of the
    // cost of a refresh.
    const since = this.rootStart;
    for (const candidate of table.values()) {
      if (since !== undefined && Number(candidate.start) < since) continue;
      if (ok(candidate) && !members.has(candidate.pid) && carriesMarker(candidate.pid, this.markerBytes))
        members.add(candidate.pid);
    }
    for (let changed = true; changed;) {
      changed = false;
      const groups = new Set<number>();
      for (const pid of members) {
        const st = table.get(pid);
        if (st === undefined) continue;
        if (!excludedGroups.has(st.pgid)) groups.add(st.pgid);
        if (!excludedGroups.has(st.sid)) groups.add(st.sid);
      }
      for (const candidate of table.values()) {
        if (!ok(candidate) || members.has(candidate.pid)) continue;
        if (members.has(candidate.ppid) || groups.has(candidate.pgid) || groups.has(candidate.sid)) {
          members.add(candidate.pid);
          changed = true;
        }
      }
    }
    for (const pid of members) this.known.set(pid, table.get(pid)!.start);
    return [...members];
  }

  /**
   * Collects the tree, then signals every member, except those in `reached` (signalled already by
   * the caller, e.g. through the run's cgroup). Returns how many were signalled.
   */
  signal(sig: NodeJS.Signals, reached: ReadonlySet<number> = new Set()): number {
    const members = this.refresh();
    let count = 0;
    try {
      process.kill(-this.rootPid, sig);
    } catch {
      // group already gone
    }
    const signalled = new Set<number>(reached);
    const send = (pids: number[]): void => {
      for (const pid of pids) {
        if (signalled.has(pid)) continue;
        signalled.add(pid);
        try {
          process.kill(pid, sig);
          count++;
        } catch {
          // already gone
        }
      }
    };
    send(members);
    // A member may have forked (a Bash tool starting its own session) between the scan and the
    // signal. After SIGKILL nothing of the tree can fork any more, so a rescan finds the stragglers.
    for (let round = 0; sig === "SIGKILL" && round < 3; round++) {
      const fresh = this.refresh().filter((pid) => !signalled.has(pid));
      if (fresh.length === 0) break;
      send(fresh);
    }
    return count;
  }

  alive(): boolean {
    return this.refresh().length > 0;
  }
}

/** A run's processes as the exit hook ends them: a ProcessTree, or a RunScope (tree and cgroup). */
export interface Killable {
  signal(sig: NodeJS.Signals): number;
  /** Removes what holds the run (its cgroup) once the kill landed; synchronous. */
  releaseNow?(): void;
}

// Every tree still running when the host exits gets SIGKILL synchronously: 'exit' handlers cannot
// wait, and a TERM the host cannot follow up would leave the tree to chance.
const live = new Set<Killable>();
let exitHookInstalled = false;

export function trackTree(tree: Killable): () => void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", () => {
      for (const tracked of live) tracked.signal("SIGKILL");
      // Every kill first, so the processes of all runs exit while the first cgroup is waited for.
      for (const tracked of live) tracked.releaseNow?.();
    });
  }
  live.add(tree);
  return () => live.delete(tree);
}

export function liveTreeCount(): number {
  return live.size;
}
