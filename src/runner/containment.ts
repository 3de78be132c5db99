// Containing one run: whatever the CLI starts must end with the run, also a Bash tool command that
// starts its own session and drops the tree marker from its environment (`setsid -f env -u
// TURNSTREAM_TREE …`, `env -i setsid -f …`). Such a process is reparented to init and looks like
// any other, so the /proc walk of ProcessTree cannot find it. What still holds it, best first:
//
// - cgroup-v2: the CLI starts in a cgroup of its own; `cgroup.kill` ends every process in it at once.
// - cgroup-v1-freezer: the same with the v1 freezer: freeze (nothing can fork any more), SIGKILL every
//   process listed, thaw (the kills land).
// - pid-namespace: the CLI is pid 1 of a pid namespace (`unshare --pid --fork --kill-child`); when it
//   dies, the kernel kills everything in the namespace.
// - proc-walk: ProcessTree alone (parent, session, process group, marker).
//
// The cgroup of a run is made under this host's folder, `<own cgroup>/turnstream/<host>/<run>`: under
// the worker's own cgroup, so the limits that apply to the worker still apply to its runs. The CLI
// enters it before it can fork anything: it is spawned through `/bin/sh -c 'echo $$ > …/cgroup.procs
// && exec "$0" "$@"'`, which moves the shell itself, then execs the CLI in the same process. The
// ProcessTree walk stays on as a second net: a process with write access to the cgroup tree (root)
// can move itself out of its cgroup.
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  writeFileSync,
} from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { ClaudeCodeCliError } from "./errors.ts";
import { silentLogger, TurnstreamError, type Logger } from "../kernel/index.ts";
import { processStartTime, type ProcessTree } from "./process-tree.ts";

export type ContainmentKind = "cgroup-v2" | "cgroup-v1-freezer" | "pid-namespace" | "proc-walk";
type CgroupKind = "cgroup-v2" | "cgroup-v1-freezer";

/** Every kind, best first. */
export const CONTAINMENT_KINDS: readonly ContainmentKind[] = [
  "cgroup-v2",
  "cgroup-v1-freezer",
  "pid-namespace",
  "proc-walk",
];

export interface Containment {
  readonly kind: ContainmentKind;
  /** cgroup kinds: this host's folder, holding one cgroup per run. */
  readonly hostDir: string | undefined;
  /** pid-namespace: the `unshare` binary. */
  readonly unshare: string | undefined;
  /** Why each better kind is not in use. */
  readonly skipped: ReadonlyArray<{ kind: ContainmentKind; reason: string }>;
}

/** What a kind means for a run's processes: one line, for `doctor` and the log. */
export function describeContainment(kind: ContainmentKind): string {
  switch (kind) {
    case "cgroup-v2":
      return "each run's CLI starts in a cgroup v2 of its own; cgroup.kill ends every process of the run, whatever it does to its session, process group or environment";
    case "cgroup-v1-freezer":
      return "each run's CLI starts in a cgroup v1 freezer cgroup of its own; the cgroup is frozen and every process in it killed, whatever it does to its session, process group or environment";
    case "pid-namespace":
      return "each run's CLI is pid 1 of a pid namespace of its own; when it exits or is killed the kernel kills every process of the run (SIGTERM reaches only processes that handle it)";
    case "proc-walk":
      return "no cgroup or pid namespace could be made: a run's processes are found in /proc by parent, session, process group and the TURNSTREAM_TREE variable; a descendant that starts its own session and drops that variable (setsid + env -u/-i) outlives its turn";
  }
}

/** The run's cgroup could not be made or entered although this host's containment uses cgroups. */
export class ContainmentError extends ClaudeCodeCliError {
  readonly path: string;

  constructor(
    path: string,
    problem: string,
    fields: { cause?: unknown; exitCode?: number | null; stderr?: string } = {},
  ) {
    super(
      `could not contain the run in its cgroup ${path}: ${problem}; check that the worker may still write the cgroup tree`,
      {
        ...fields,
        kind: "cli_error",
        retryable: true,
      },
    );
    this.path = path;
  }
}

/** The launcher in front of the CLI (sh or unshare) failed to exec it: reported like a failed spawn. */
export class LaunchError extends TurnstreamError {
  declare readonly code: "ENOENT" | "EACCES";

  constructor(code: "ENOENT" | "EACCES", launcher: string) {
    super(`${launcher} could not exec the claude CLI (${code})`, { code });
  }
}

// ---------------------------------------------------------------------------------------------
// Where this process's cgroups are

/** Safe to put in a shell word and in the watchdog's colon/space separated line. */
export const SAFE_PATH = /^\/[A-Za-z0-9_.@/-]*$/;

export interface CgroupMount {
  root: string;
  point: string;
  fstype: string;
  superOptions: string[];
}

export function readMounts(): CgroupMount[] {
  const out: CgroupMount[] = [];
  let text: string;
  try {
    text = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return out;
  }
  for (const line of text.split("\n")) {
    const [pre, post] = line.split(" - ");
    if (pre === undefined || post === undefined) continue;
    const fields = pre.split(" ");
    const [fstype, , superOpts] = post.split(" ");
    if (fstype !== "cgroup" && fstype !== "cgroup2") continue;
    const unescape = (s: string): string =>
      s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    out.push({
      root: unescape(fields[3] ?? ""),
      point: unescape(fields[4] ?? ""),
      fstype,
      superOptions: (superOpts ?? "").split(","),
    });
  }
  return out;
}

/** This process's cgroup in the v2 hierarchy ("0::") or in the v1 hierarchy holding `controller`. */
function ownCgroupPath(controller: string | undefined): string | undefined {
  let text: string;
  try {
    text = readFileSync("/proc/self/cgroup", "utf8");
  } catch {
    return undefined;
  }
  for (const line of text.split("\n")) {
    const first = line.indexOf(":");
    const second = line.indexOf(":", first + 1);
    if (first === -1 || second === -1) continue;
    const controllers = line.slice(first + 1, second);
    const path = line.slice(second + 1);
    if (controller === undefined ? line.startsWith("0::") : controllers.split(",").includes(controller)) return path;
  }
  return undefined;
}

/** The folder of this process's own cgroup for `kind`, or why there is none. */
function ownCgroupDir(kind: CgroupKind): { dir: string } | { reason: string } {
  return ownHierarchyDir(kind === "cgroup-v2" ? undefined : "freezer");
}

/**
 * The folder of this process's own cgroup in the v2 hierarchy (`controller` undefined) or in the v1
 * hierarchy holding `controller`, or why there is none.
 */
export function ownHierarchyDir(controller: string | undefined): { dir: string } | { reason: string } {
  const name = controller === undefined ? "cgroup v2" : `v1 ${controller}`;
  const own = ownCgroupPath(controller);
  if (own === undefined) return { reason: `this process is in no ${name} hierarchy` };
  const mount = readMounts().find(
    (candidate) =>
      (controller === undefined
        ? candidate.fstype === "cgroup2"
        : candidate.fstype === "cgroup" && candidate.superOptions.includes(controller)) &&
      (candidate.root === "/" || own === candidate.root || own.startsWith(`${candidate.root}/`)),
  );
  if (mount === undefined) return { reason: `no ${name} mount shows this process's cgroup ${own}` };
  const dir = mount.point + (mount.root === "/" ? own : own.slice(mount.root.length));
  const clean = dir.endsWith("/") ? dir.slice(0, -1) : dir;
  if (!SAFE_PATH.test(clean))
    return { reason: `its path ${JSON.stringify(clean)} has characters the launcher does not quote` };
  return { dir: clean };
}

let ownHostName: string | undefined;

/** `<pid namespace>-<pid>-<start time>`: names this process for as long as it lives, and only it. */
export function hostName(): string {
  ownHostName ??= readHostName();
  return ownHostName;
}

function readHostName(): string {
  let ns = "0";
  try {
    ns = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? "0";
  } catch {
    // no namespace link: every host shares "0"
  }
  return `${ns}-${process.pid}-${processStartTime(process.pid) ?? "0"}`;
}

// ---------------------------------------------------------------------------------------------
// Choosing the containment (once per process)

export const pause = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * The shell line that moves the shell into each of `dirs` (the run's cgroup, then those holding its
 * limits), caps the size of any file it writes (`ulimit -f`, in POSIX's 512-byte blocks), and then
 * execs the CLI ("$0" "$@").
 */
function enterAndExec(dirs: readonly string[], fileBlocks?: number): string {
  const enter = dirs.map((dir) => `echo $$ > '${dir}/cgroup.procs' || exit ${ENTER_FAILED}; `).join("");
  const cap = fileBlocks === undefined ? "" : `ulimit -f ${fileBlocks} || exit ${ENTER_FAILED}; `;
  return `${enter}${cap}exec "$0" "$@"`;
}
/** The launcher's exit status when it could not enter the run's cgroup. */
const ENTER_FAILED = 125;

export function tryRmdir(path: string): boolean {
  try {
    rmdirSync(path);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/** Makes this host's folder for `kind` and proves a process can enter a cgroup in it. */
function prepareCgroup(kind: CgroupKind): { hostDir: string } | { reason: string } {
  const own = ownCgroupDir(kind);
  if ("reason" in own) return own;
  const hostDir = join(own.dir, "turnstream", hostName());
  try {
    mkdirSync(hostDir, { recursive: true });
  } catch (err) {
    return { reason: `cannot make ${hostDir} (${(err as NodeJS.ErrnoException).code ?? "error"})` };
  }
  const problem = probeCgroup(kind, hostDir);
  if (problem === undefined) return { hostDir };
  tryRmdir(hostDir);
  return { reason: problem };
}

/** Why no run could be contained under `hostDir`, or undefined when a process did enter a cgroup there. */
function probeCgroup(kind: CgroupKind, hostDir: string): string | undefined {
  const key = kind === "cgroup-v2" ? "cgroup.kill" : "freezer.state";
  if (!existsSync(join(hostDir, key)))
    return `${hostDir} has no ${key}${kind === "cgroup-v2" ? " (kernel older than 5.14)" : ""}`;
  return probeEntry(hostDir);
}

/**
 * Whether a process can enter a new cgroup under `hostDir` as the launcher enters a run's: undefined
 * when one did, else why not. `lacks` first says what the new cgroup is missing, if anything. The
 * probe cgroup is removed either way.
 */
export function probeEntry(
  hostDir: string,
  lacks: (probe: string) => string | undefined = () => undefined,
): string | undefined {
  const probe = join(hostDir, `probe-${randomUUID()}`);
  try {
    mkdirSync(probe);
    const missing = lacks(probe);
    if (missing !== undefined) return missing;
    const result = spawnSync("/bin/sh", ["-c", enterAndExec([probe]), "/bin/true"], {
      stdio: "ignore",
      timeout: 10_000,
    });
    return result.status === 0
      ? undefined
      : `a process cannot enter a cgroup under ${hostDir} (exit ${String(result.status)})`;
  } catch (err) {
    return `cannot make a cgroup under ${hostDir} (${(err as NodeJS.ErrnoException).code ?? "error"})`;
  } finally {
    tryRmdir(probe);
  }
}

/** Where the executable `name` is on `path` (default this process's PATH), or undefined. */
export function findOnPath(name: string, path: string = process.env["PATH"] ?? "/usr/bin:/bin"): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (dir === "") continue;
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Finds `unshare` and proves it may make a pid namespace here. */
function preparePidNamespace(): { unshare: string } | { reason: string } {
  const unshare = findOnPath("unshare");
  if (unshare === undefined) return { reason: "no unshare on PATH" };
  const result = spawnSync(unshare, ["--pid", "--fork", "--kill-child", "--", "/bin/true"], {
    stdio: "ignore",
    timeout: 10_000,
  });
  if (result.status !== 0) return { reason: `unshare --pid is not permitted (exit ${String(result.status)})` };
  return { unshare };
}

function detect(kinds: readonly ContainmentKind[]): Containment {
  const skipped: Array<{ kind: ContainmentKind; reason: string }> = [];
  for (const kind of CONTAINMENT_KINDS) {
    if (!kinds.includes(kind)) continue;
    if (kind === "proc-walk") break;
    if (kind === "pid-namespace") {
      const pidNamespace = preparePidNamespace();
      if ("unshare" in pidNamespace) return { kind, hostDir: undefined, unshare: pidNamespace.unshare, skipped };
      skipped.push({ kind, reason: pidNamespace.reason });
      continue;
    }
    const cgroup = prepareCgroup(kind);
    if ("hostDir" in cgroup) return { kind, hostDir: cgroup.hostDir, unshare: undefined, skipped };
    skipped.push({ kind, reason: cgroup.reason });
  }
  return { kind: "proc-walk", hostDir: undefined, unshare: undefined, skipped };
}

let active: Containment | undefined;
let exitHookInstalled = false;

/**
 * This host's folder goes with it: at exit it is empty unless a run's cgroup is still dying (then the sweep takes it).
 */
function removeHostDirAtExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    if (active?.hostDir !== undefined) tryRmdir(active.hostDir);
  });
}

function announce(chosen: Containment, logger: Logger): void {
  const fields = { containment: chosen.kind, hostDir: chosen.hostDir, skipped: chosen.skipped };
  if (chosen.kind === "proc-walk") logger.warn(fields, `process containment: ${describeContainment(chosen.kind)}`);
  else logger.info(fields, `process containment: ${describeContainment(chosen.kind)}`);
}

/** This process's containment, chosen on first use (the best the host allows) and logged once. */
export function containment(logger: Logger = silentLogger): Containment {
  if (active === undefined) {
    active = detect(CONTAINMENT_KINDS);
    removeHostDirAtExit();
    announce(active, logger);
  }
  return active;
}

/**
 * Chooses this process's containment again, among `kinds` only (best first; proc-walk when none is
 * possible). For tests and for an operator who must rule a kind out.
 */
export function selectContainment(kinds: readonly ContainmentKind[], logger: Logger = silentLogger): Containment {
  const before = active;
  active = detect(kinds);
  if (before?.hostDir !== undefined && before.hostDir !== active.hostDir) tryRmdir(before.hostDir);
  removeHostDirAtExit();
  announce(active, logger);
  return active;
}

// ---------------------------------------------------------------------------------------------
// One run's cgroup

/** The cgroups this process made for runs that have not been removed yet (the sweep leaves them). */
const liveCgroups = new Set<string>();

/** A run's cgroup the sweep must leave alone until it is dropped (limits.ts's cgroups, like RunCgroup's). */
export function holdCgroup(path: string): void {
  liveCgroups.add(path);
}

export function dropCgroup(path: string): void {
  liveCgroups.delete(path);
}

export function readPids(dir: string): number[] {
  try {
    const text = readFileSync(join(dir, "cgroup.procs"), "latin1");
    return text === "" ? [] : text.trim().split("\n").map(Number);
  } catch {
    return [];
  }
}

export function signalAll(pids: readonly number[], sig: NodeJS.Signals): number[] {
  const sent: number[] = [];
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
      sent.push(pid);
    } catch {
      // already gone
    }
  }
  return sent;
}

/** Waits (bounded) for a v1 freezer cgroup to report FROZEN: then none of its tasks is mid-fork. */
function awaitFrozen(dir: string): void {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (readFileSync(join(dir, "freezer.state"), "latin1").startsWith("FROZEN")) return;
    pause(1);
  }
}

/**
 * SIGKILLs every process in the cgroup at `dir`, including any it is forking (with cgroup.kill or the
 * freezer; a v1 cgroup with neither, one holding a limit, gets a SIGKILL per listed process); returns
 * the pids it listed.
 */
function killCgroup(dir: string): number[] {
  const pids = readPids(dir);
  if (existsSync(join(dir, "cgroup.kill"))) {
    writeFileSync(join(dir, "cgroup.kill"), "1");
    return pids;
  }
  const state = join(dir, "freezer.state");
  if (!existsSync(state)) return signalAll(pids, "SIGKILL");
  writeFileSync(state, "FROZEN");
  try {
    awaitFrozen(dir);
    // Frozen tasks keep a pending SIGKILL until they are thawed, so the list cannot change under us.
    return signalAll(readPids(dir), "SIGKILL");
  } finally {
    writeFileSync(state, "THAWED");
  }
}

export class RunCgroup {
  readonly kind: CgroupKind;
  /** The cgroup's folder. */
  readonly path: string;

  private constructor(kind: CgroupKind, path: string) {
    this.kind = kind;
    this.path = path;
  }

  /** Makes the run's cgroup (before the spawn). Throws ContainmentError when it cannot. */
  static create(chosen: Containment, name: string): RunCgroup {
    if (chosen.hostDir === undefined || (chosen.kind !== "cgroup-v2" && chosen.kind !== "cgroup-v1-freezer")) {
      throw new ContainmentError(name, `containment ${chosen.kind} has no cgroups`);
    }
    const path = join(chosen.hostDir, name);
    try {
      mkdirSync(path);
    } catch (err) {
      // The host's folder was removed under us (an operator cleaning up): make it again, once.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT")
        throw new ContainmentError(path, (err as Error).message, { cause: err });
      try {
        mkdirSync(chosen.hostDir, { recursive: true });
        mkdirSync(path);
      } catch (again) {
        throw new ContainmentError(path, (again as Error).message, { cause: again });
      }
    }
    liveCgroups.add(path);
    return new RunCgroup(chosen.kind, path);
  }

  /** The processes in the cgroup. */
  pids(): number[] {
    return readPids(this.path);
  }

  /** Sends `sig` to every process in the cgroup (SIGKILL: atomically); returns the pids reached. */
  signal(sig: NodeJS.Signals): number[] {
    if (sig === "SIGKILL") {
      try {
        return killCgroup(this.path);
      } catch {
        return signalAll(this.pids(), sig);
      }
    }
    return signalAll(this.pids(), sig);
  }

  /** Removes the cgroup; false while processes are still in it. */
  remove(): boolean {
    const gone = tryRmdir(this.path);
    if (gone) liveCgroups.delete(this.path);
    return gone;
  }
}

// ---------------------------------------------------------------------------------------------
// Spawning under the containment

export interface LaunchCommand {
  file: string;
  args: string[];
  /** The name of the launcher in front of the CLI (sh, unshare), if any. */
  launcher: string | undefined;
}

/** What a run's limits add to its launch: the cgroups holding them, and a cap on any file's size. */
export interface LaunchLimits {
  /** Cgroup folders the CLI enters after the run's own (none when the limits live there). */
  enter: readonly string[];
  /** RLIMIT_FSIZE of the run's processes, in 512-byte blocks. */
  fileBlocks: number | undefined;
}

const NO_LIMITS: LaunchLimits = { enter: [], fileBlocks: undefined };

/** How to spawn `bin args` so the CLI starts contained. The prompt is never on argv (it is on stdin). */
export function launchCommand(
  chosen: Containment,
  cgroup: RunCgroup | undefined,
  bin: string,
  args: readonly string[],
  limits: LaunchLimits = NO_LIMITS,
): LaunchCommand {
  const dirs = [...(cgroup === undefined ? [] : [cgroup.path]), ...limits.enter];
  const unshare = cgroup === undefined && chosen.kind === "pid-namespace" ? chosen.unshare : undefined;
  const inNamespace = (u: string): string[] => [u, "--pid", "--fork", "--kill-child", "--", bin, ...args];
  const target = unshare === undefined ? [bin, ...args] : inNamespace(unshare);
  if (dirs.length > 0 || limits.fileBlocks !== undefined) {
    return { file: "/bin/sh", args: ["-c", enterAndExec(dirs, limits.fileBlocks), ...target], launcher: "sh" };
  }
  if (unshare !== undefined) return { file: unshare, args: target.slice(1), launcher: "unshare" };
  return { file: bin, args: [...args], launcher: undefined };
}

/**
 * What a launcher's exit status says when the CLI never printed a line: 125 from sh is a cgroup it
 * could not enter, 126/127 an exec that failed (reported as a spawn of the CLI would have been).
 */
export function launchFailure(
  cmd: LaunchCommand,
  cgroup: RunCgroup | undefined,
  exit: { exitCode: number | null; stderr: string },
  lines: number,
): ContainmentError | LaunchError | undefined {
  if (cmd.launcher === undefined || lines > 0) return undefined;
  if (exit.exitCode === ENTER_FAILED && cmd.launcher === "sh") {
    const problem = "the launcher could not enter its cgroups or set its file size limit";
    return new ContainmentError(cgroup?.path ?? "(the run's limit cgroups)", problem, exit);
  }
  if (exit.exitCode === 126) return new LaunchError("EACCES", cmd.launcher);
  if (exit.exitCode === 127) return new LaunchError("ENOENT", cmd.launcher);
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// One run's processes: the tree and the cgroup together

/** The run's processes as one: its cgroup (when there is one) and its ProcessTree walk. */
export class RunScope {
  readonly tree: ProcessTree | undefined;
  readonly cgroup: RunCgroup | undefined;

  constructor(tree: ProcessTree | undefined, cgroup: RunCgroup | undefined) {
    this.tree = tree;
    this.cgroup = cgroup;
  }

  /** The live members: the cgroup's processes and the tree's. */
  members(): number[] {
    const inCgroup = this.cgroup?.pids() ?? [];
    const inTree = this.tree?.refresh() ?? [];
    return inCgroup.length === 0 ? inTree : [...new Set([...inCgroup, ...inTree])];
  }

  /** Signals the cgroup, then whatever the tree walk finds beyond it; returns how many were signalled. */
  signal(sig: NodeJS.Signals): number {
    const reached = new Set(this.cgroup?.signal(sig) ?? []);
    return reached.size + (this.tree?.signal(sig, reached) ?? 0);
  }

  /**
   * Removes the cgroup once it is empty. After a SIGKILL its processes take a moment to exit, so it
   * retries a bounded number of times (killing again what is still there) before leaving it to the
   * sweep.
   */
  async release(logger: Logger = silentLogger): Promise<void> {
    const cg = this.cgroup;
    if (cg === undefined) return;
    for (let attempt = 0; !cg.remove(); attempt++) {
      if (attempt === RELEASE_ATTEMPTS) {
        liveCgroups.delete(cg.path);
        logger.warn({ cgroup: cg.path, left: cg.pids() }, "could not remove the run's cgroup; the sweep will");
        return;
      }
      cg.signal("SIGKILL");
      await new Promise((r) => setTimeout(r, RELEASE_DELAY_MS));
    }
  }

  /**
   * The same, synchronously, and this host's folder with it once empty: for the host's exit hook,
   * which cannot wait on timers. It blocks the exit for the same bound: killed CLI processes take a
   * while to tear down on a loaded host, and what is left is otherwise the next sweep's.
   */
  releaseNow(): void {
    const cg = this.cgroup;
    if (cg === undefined) return;
    for (let attempt = 0; !cg.remove() && attempt < RELEASE_ATTEMPTS; attempt++) pause(RELEASE_DELAY_MS);
    tryRmdir(dirname(cg.path));
  }
}

const RELEASE_ATTEMPTS = 100;
const RELEASE_DELAY_MS = 10;

// ---------------------------------------------------------------------------------------------
// Sweeping what dead hosts left

/** The v1 hierarchies a run's limits may live in (limits.ts), swept like the killing ones. */
export const LIMIT_HIERARCHIES = ["pids", "memory", "cpu"] as const;

export interface CgroupSweepResult {
  /** Run cgroups removed (their processes killed first). */
  removed: string[];
  /** Host folders of live processes, left alone. */
  live: string[];
  /** Cgroups that could not be removed. */
  failed: string[];
}

function hostIsLive(name: string, ownNs: string): boolean {
  const parts = /^(\d+)-(\d+)-(\d+)$/.exec(name);
  // Not ours to judge: a name we did not write, a host in another pid namespace, or one whose start
  // time could not be read.
  if (parts === null || parts[1] !== ownNs || parts[3] === "0") return true;
  return processStartTime(Number(parts[2])) === parts[3];
}

function listDirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return [];
  }
}

/** Kills what is in a run cgroup and removes it, waiting (bounded) for its processes to exit. */
function removeStale(path: string): boolean {
  for (let attempt = 0; attempt < 50; attempt++) {
    if (tryRmdir(path)) return true;
    try {
      killCgroup(path);
    } catch {
      // not a cgroup we can kill: the rmdir decides
    }
    pause(RELEASE_DELAY_MS);
  }
  return false;
}

/**
 * Removes the run cgroups of turnstream hosts that died (a crashed worker leaves them), killing what
 * is still in them first, and this host's own cgroups of runs that ended without removing theirs.
 * Looks at both cgroup hierarchies whatever this process uses. Never throws.
 */
export function sweepCgroups(options: { logger?: Logger } = {}): CgroupSweepResult {
  const logger = options.logger ?? silentLogger;
  const result: CgroupSweepResult = { removed: [], live: [], failed: [] };
  const self = hostName();
  const ownNs = self.split("-")[0]!;
  // The killing hierarchies first (their runs' processes die at once), then those holding limits.
  const parents = new Set<string>();
  for (const controller of [undefined, "freezer", ...LIMIT_HIERARCHIES]) {
    const own = ownHierarchyDir(controller);
    if (!("reason" in own)) parents.add(join(own.dir, "turnstream"));
  }
  for (const parent of parents) {
    for (const host of listDirs(parent)) {
      const hostDir = join(parent, host);
      const mine = host === self;
      if (!mine && hostIsLive(host, ownNs)) {
        result.live.push(hostDir);
        continue;
      }
      for (const run of listDirs(hostDir)) {
        const path = join(hostDir, run);
        if (mine && liveCgroups.has(path)) continue;
        if (removeStale(path)) result.removed.push(path);
        else {
          result.failed.push(path);
          logger.warn({ cgroup: path }, "sweep could not remove a stale run cgroup");
        }
      }
      if (!mine) tryRmdir(hostDir);
    }
  }
  return result;
}
