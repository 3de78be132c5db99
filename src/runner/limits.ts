// Bounding one run: processes, memory, CPU, scratch disk and wall time. Where the host lets this
// process make cgroups, each limit is the kernel's: `pids.max`, `memory.max` (v2) or
// `memory.limit_in_bytes` (v1), `cpu.max` (v2) or `cpu.cfs_quota_us` (v1), written in cgroups this
// process made for the run (never in one it did not make) and entered by the CLI's launcher before it
// execs the CLI (containment.ts). A controller the v2 run cgroup cannot have (the worker's own cgroup
// does not delegate it) is taken from its v1 hierarchy when one is mounted and writable. What no
// cgroup can hold is sampled: the run's processes counted, their resident memory summed, every
// CHECK_MS; CPU then has no bound at all. Every file a run's process writes is capped at the scratch
// limit (RLIMIT_FSIZE, through the launcher's `ulimit -f`), and the run's own scratch (its config
// home: TMPDIR, CLAUDE_CONFIG_DIR, XDG_RUNTIME_DIR) is measured every CHECK_MS.
//
// Hitting a limit fails the run with a kind of its own, even when the CLI got a result out first:
// a fork refused at pids.max (pids.events `max`), a process the OOM killer ended (memory.events or
// memory.oom_control `oom_kill`), the scratch past its size, the wall time past its maximum. CPU is
// throttling, never a failure.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  containment,
  ContainmentError,
  dropCgroup,
  holdCgroup,
  hostName,
  LIMIT_HIERARCHIES,
  ownHierarchyDir,
  probeEntry,
  readPids,
  SAFE_PATH,
  signalAll,
  tryRmdir,
  type Containment,
  type RunCgroup,
} from "./containment.ts";
import { silentLogger, type Logger } from "../kernel/index.ts";

/** What one run may use. Each is optional: an unset limit is not applied. */
export interface RunLimits {
  /** Tasks (processes and threads) in the run at once. */
  pids?: number | undefined;
  /** Memory of the run's processes (resident and page cache; no swap where the kernel lets us say so). */
  memoryBytes?: number | undefined;
  /** CPUs' worth of time per period (0.5: half a CPU); past it the run is throttled. */
  cpus?: number | undefined;
  /** Bytes the run's scratch may hold; also the most any one file it writes anywhere may hold. */
  scratchBytes?: number | undefined;
  /** Wall time of a turn; past it the tree is ended (`limit_duration`). */
  durationMs?: number | undefined;
}

export type LimitErrorKind = "limit_pids" | "limit_memory" | "limit_disk" | "limit_duration";

/** Every kind a run that hit a limit fails with. None is retryable: the same turn hits it again. */
export const LIMIT_ERROR_KINDS: readonly LimitErrorKind[] = [
  "limit_pids",
  "limit_memory",
  "limit_disk",
  "limit_duration",
];

export function isLimitKind(kind: string | undefined): kind is LimitErrorKind {
  return (LIMIT_ERROR_KINDS as readonly string[]).includes(kind ?? "");
}

/** A limit the run hit, and what showed it. */
export interface LimitHit {
  kind: LimitErrorKind;
  detail: string;
}

/** How often the cgroups' event counters, the sampled limits and the scratch are looked at. */
export const CHECK_MS = 500;
/** A scratch holding more entries than this counts as full (inodes are disk too), and is not walked further. */
export const MAX_SCRATCH_ENTRIES = 100_000;

type Controller = (typeof LIMIT_HIERARCHIES)[number];
type Version = "v2" | "v1";

/** Where a controller's limits go: under this host's folder of the v2 hierarchy or of the controller's v1 one. */
interface Place {
  version: Version;
  hostDir: string;
}

/** Which controllers this host offers for runs, and why each missing one is missing. */
export interface LimitSupport {
  readonly places: Readonly<Partial<Record<Controller, Place>>>;
  readonly missing: Readonly<Partial<Record<Controller, string>>>;
}

/** The file each controller's limit is written to. */
const LIMIT_FILE: Record<Version, Record<Controller, string>> = {
  v2: { pids: "pids.max", memory: "memory.max", cpu: "cpu.max" },
  v1: { pids: "pids.max", memory: "memory.limit_in_bytes", cpu: "cpu.cfs_quota_us" },
};

const errCode = (err: unknown): string => (err as NodeJS.ErrnoException).code ?? "error";

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "latin1");
  } catch {
    return undefined;
  }
}

/** A `name N` line of a cgroup's flat-keyed file (pids.events, memory.events, memory.oom_control). */
function counter(path: string, name: string): number {
  const match = new RegExp(`^${name} (\\d+)$`, "m").exec(readText(path) ?? "");
  return match === null ? 0 : Number(match[1]);
}

// ---------------------------------------------------------------------------------------------
// Which controllers this host offers (once per containment)

/** Proves a process can enter a cgroup made under `hostDir` that has `file`. */
function probeLimitDir(hostDir: string, file: string): string | undefined {
  return probeEntry(hostDir, (probe) =>
    existsSync(join(probe, file)) ? undefined : `a cgroup under ${hostDir} has no ${file}`,
  );
}

/**
 * Enables `controller` for the runs under the v2 `hostDir`: in `<own>/turnstream` and the host's
 * folder, both made by turnstream. The worker's own cgroup must already delegate it (it lists the
 * controller in `turnstream/cgroup.controllers`); that cgroup is not ours to change.
 */
function delegateV2(hostDir: string, controller: Controller): string | undefined {
  const parent = dirname(hostDir);
  if (!(readText(join(parent, "cgroup.controllers")) ?? "").split(/\s+/).includes(controller)) {
    const own = dirname(parent);
    return `the worker's cgroup ${own} does not delegate ${controller} (its cgroup.subtree_control lacks it)`;
  }
  try {
    for (const dir of [parent, hostDir]) writeFileSync(join(dir, "cgroup.subtree_control"), `+${controller}`);
  } catch (err) {
    return `cannot enable ${controller} under ${parent} (${errCode(err)})`;
  }
  return probeLimitDir(hostDir, LIMIT_FILE.v2[controller]);
}

/** This host's folder in `controller`'s v1 hierarchy, made and proven, or why there is none. */
function prepareV1(controller: Controller): Place | { reason: string } {
  const own = ownHierarchyDir(controller);
  if ("reason" in own) return own;
  const hostDir = join(own.dir, "turnstream", hostName());
  if (!SAFE_PATH.test(hostDir)) {
    return { reason: `its path ${JSON.stringify(hostDir)} has characters the launcher does not quote` };
  }
  try {
    mkdirSync(hostDir, { recursive: true });
  } catch (err) {
    return { reason: `cannot make ${hostDir} (${errCode(err)})` };
  }
  const problem = probeLimitDir(hostDir, LIMIT_FILE.v1[controller]);
  if (problem === undefined) return { version: "v1", hostDir };
  tryRmdir(hostDir);
  return { reason: problem };
}

function placeController(chosen: Containment, controller: Controller): Place | { reason: string } {
  const v2 =
    chosen.kind === "cgroup-v2" && chosen.hostDir !== undefined
      ? delegateV2(chosen.hostDir, controller)
      : "runs have no cgroup v2";
  if (v2 === undefined) return { version: "v2", hostDir: chosen.hostDir! };
  const v1 = prepareV1(controller);
  return "reason" in v1 ? { reason: `${v2}; ${v1.reason}` } : v1;
}

function detectSupport(chosen: Containment): LimitSupport {
  const places: Partial<Record<Controller, Place>> = {};
  const missing: Partial<Record<Controller, string>> = {};
  for (const controller of LIMIT_HIERARCHIES) {
    const place = placeController(chosen, controller);
    if ("reason" in place) missing[controller] = place.reason;
    else places[controller] = place;
  }
  return { places, missing };
}

let detected: { containment: Containment; support: LimitSupport } | undefined;
const v1HostDirs = new Set<string>();
let exitHookInstalled = false;

/** This host's v1 folders go with it (empty at exit unless a run's cgroup is still dying: the sweep takes it then). */
function removeV1HostDirsAtExit(support: LimitSupport): void {
  for (const place of Object.values(support.places)) if (place.version === "v1") v1HostDirs.add(place.hostDir);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const dir of v1HostDirs) tryRmdir(dir);
  });
}

/**
 * The controllers this host offers runs under `c` (this process's containment by default), found
 * once and logged then: a controller no cgroup can hold is a warning (its limit is only sampled).
 */
export function limitSupport(chosen: Containment = containment(), logger: Logger = silentLogger): LimitSupport {
  if (detected?.containment !== chosen) {
    detected = { containment: chosen, support: detectSupport(chosen) };
    removeV1HostDirsAtExit(detected.support);
    const { places, missing } = detected.support;
    if (Object.keys(missing).length === 0) logger.info({ places }, "run limits: every controller is a cgroup's");
    else logger.warn({ places, missing }, "run limits: controllers without a cgroup are sampled or not held");
  }
  return detected.support;
}

// ---------------------------------------------------------------------------------------------
// One run's limit cgroups

const CPU_PERIOD_US = 100_000;

/** The values written for each controller, in the order the kernel needs them. */
type LimitWrite = [file: string, value: string, need: "required" | "optional"];

function limitWrites(version: Version, controller: Controller, limits: RunLimits): LimitWrite[] {
  if (controller === "pids") return [[LIMIT_FILE[version].pids, String(limits.pids), "required"]];
  if (controller === "memory") {
    const bytes = String(limits.memoryBytes);
    // No swap beyond the limit where the kernel offers the knob (memsw must come after the limit).
    if (version === "v2")
      return [
        ["memory.max", bytes, "required"],
        ["memory.swap.max", "0", "optional"],
      ];
    return [
      ["memory.limit_in_bytes", bytes, "required"],
      ["memory.memsw.limit_in_bytes", bytes, "optional"],
    ];
  }
  const quota = String(Math.max(1000, Math.round(limits.cpus! * CPU_PERIOD_US)));
  if (version === "v2") return [["cpu.max", `${quota} ${CPU_PERIOD_US}`, "required"]];
  return [
    ["cpu.cfs_period_us", String(CPU_PERIOD_US), "required"],
    ["cpu.cfs_quota_us", quota, "required"],
  ];
}

const LIMIT_OF: Record<Controller, keyof RunLimits> = { pids: "pids", memory: "memoryBytes", cpu: "cpus" };

function makeDir(hostDir: string, path: string): void {
  try {
    mkdirSync(path);
  } catch (err) {
    // The host's folder was removed under us (an operator cleaning up): make it again, once.
    if (errCode(err) !== "ENOENT") throw err;
    mkdirSync(hostDir, { recursive: true });
    mkdirSync(path);
  }
}

/** The cgroups holding one run's limits: the run's own v2 cgroup, and v1 cgroups made for it. */
export class RunLimitGroups {
  /** Cgroup folders the CLI's launcher enters after the run's own cgroup. */
  readonly enter: readonly string[];
  /** Where each limited controller's files are. */
  readonly #dirs: ReadonlyMap<Controller, string>;
  readonly #versions: ReadonlyMap<Controller, Version>;
  readonly #limits: RunLimits;

  private constructor(
    dirs: Map<Controller, string>,
    versions: Map<Controller, Version>,
    enter: string[],
    limits: RunLimits,
  ) {
    this.#dirs = dirs;
    this.#versions = versions;
    this.enter = enter;
    this.#limits = limits;
  }

  /**
   * Makes the run's v1 limit cgroups and writes every limit the host can hold (before the spawn).
   * Throws ContainmentError when a cgroup cannot be made or a limit not written: a run never starts
   * with less bounding than the host offers.
   */
  static create(support: LimitSupport, cgroup: RunCgroup | undefined, name: string, limits: RunLimits): RunLimitGroups {
    const dirs = new Map<Controller, string>();
    const versions = new Map<Controller, Version>();
    const made: string[] = [];
    try {
      for (const controller of LIMIT_HIERARCHIES) {
        const place = support.places[controller];
        if (limits[LIMIT_OF[controller]] === undefined || place === undefined) continue;
        if (place.version === "v2" && cgroup === undefined) continue;
        const dir = place.version === "v2" ? cgroup!.path : join(place.hostDir, name);
        // A v1 hierarchy co-mounted with the run's own (freezer) cgroup, or with another limit's, is already made.
        if (place.version === "v1" && dir !== cgroup?.path && !made.includes(dir)) {
          makeDir(place.hostDir, dir);
          holdCgroup(dir);
          made.push(dir);
        }
        writeLimits(dir, place.version, controller, limits);
        dirs.set(controller, dir);
        versions.set(controller, place.version);
      }
    } catch (err) {
      for (const dir of made) if (tryRmdir(dir)) dropCgroup(dir);
      const problem = `could not set the run's limits (${(err as Error).message})`;
      throw new ContainmentError(made.at(-1) ?? name, problem, { cause: err });
    }
    return new RunLimitGroups(dirs, versions, made, limits);
  }

  /** Whether `controller`'s limit is the kernel's for this run. */
  holds(controller: Controller): boolean {
    return this.#dirs.has(controller);
  }

  /** The limit the kernel reports hit, if any: a fork refused at pids.max, a process the OOM killer ended. */
  hit(): LimitHit | undefined {
    const pidsDir = this.#dirs.get("pids");
    const refused = pidsDir === undefined ? 0 : counter(join(pidsDir, "pids.events"), "max");
    if (refused > 0) {
      const detail = `a fork was refused at the run's limit of ${this.#limits.pids} tasks (pids.events max ${refused})`;
      return { kind: "limit_pids", detail };
    }
    const memoryDir = this.#dirs.get("memory");
    if (memoryDir === undefined) return undefined;
    const v2 = this.#versions.get("memory") === "v2";
    const killed = counter(join(memoryDir, v2 ? "memory.events" : "memory.oom_control"), "oom_kill");
    if (killed === 0) return undefined;
    const limit = sizeText(this.#limits.memoryBytes!);
    const detail = `the kernel's OOM killer ended ${killed} process(es) at the run's limit of ${limit}`;
    return { kind: "limit_memory", detail };
  }

  /** Removes the v1 cgroups once their processes are gone (killing what is still there), bounded. */
  async release(): Promise<void> {
    for (const dir of this.enter) {
      for (let attempt = 0; !tryRmdir(dir) && attempt < RELEASE_ATTEMPTS; attempt++) {
        signalAll(readPids(dir), "SIGKILL");
        await new Promise((r) => setTimeout(r, RELEASE_DELAY_MS));
      }
      // Left for the sweep when it could not go.
      dropCgroup(dir);
    }
  }
}

const RELEASE_ATTEMPTS = 100;
const RELEASE_DELAY_MS = 10;

function writeLimits(dir: string, version: Version, controller: Controller, limits: RunLimits): void {
  for (const [file, value, need] of limitWrites(version, controller, limits)) {
    try {
      writeFileSync(join(dir, file), value);
    } catch (err) {
      if (need === "required") throw new Error(`${join(dir, file)}: ${errCode(err)}`);
    }
  }
}

export const sizeText = (bytes: number): string =>
  bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;

/** RLIMIT_FSIZE for the run, in the 512-byte blocks of POSIX `ulimit -f`. */
export function fileBlocksOf(limits: RunLimits | undefined): number | undefined {
  return limits?.scratchBytes === undefined ? undefined : Math.max(1, Math.floor(limits.scratchBytes / 512));
}

// ---------------------------------------------------------------------------------------------
// Sampling what no cgroup holds, and the scratch

/** A process's resident set from /proc/<pid>/status, in bytes (0 when it is gone). */
export function residentBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readText(`/proc/${pid}/status`) ?? "");
  return match === null ? 0 : Number(match[1]) * 1024;
}

/**
 * Disk a folder's tree takes (allocated blocks, so a sparse file counts what it holds) and its
 * entries, up to `maxEntries`.
 */
export async function scratchUsage(dir: string, maxEntries = MAX_SCRATCH_ENTRIES): Promise<ScratchUse> {
  let bytes = 0;
  let entries = 0;
  const pending = [dir];
  while (pending.length > 0 && entries <= maxEntries) {
    const current = pending.pop()!;
    let names: string[];
    try {
      names = await readdir(current);
    } catch {
      continue;
    }
    for (const name of names) {
      if (++entries > maxEntries) break;
      try {
        const st = await lstat(join(current, name));
        bytes += st.blocks * 512;
        if (st.isDirectory()) pending.push(join(current, name));
      } catch {
        // removed meanwhile
      }
    }
  }
  return { bytes, entries };
}

/** What a scratch holds. */
export interface ScratchUse {
  bytes: number;
  entries: number;
}

/** What the watch over one run needs. */
export interface LimitWatchTarget {
  limits: RunLimits;
  groups: RunLimitGroups | undefined;
  /** The run's live processes (its cgroup's and its tree's). */
  members: () => number[];
  /** The run's scratch (its config home, or the TMPDIR made for it). */
  scratchDir: string | undefined;
}

/** Looks at a run's limits every CHECK_MS and reports the first one hit (once). */
export class LimitWatch {
  readonly #target: LimitWatchTarget;
  readonly #onHit: (hit: LimitHit) => void;
  #timer: NodeJS.Timeout | undefined;
  #checking = false;
  #reported = false;

  constructor(target: LimitWatchTarget, onHit: (hit: LimitHit) => void) {
    this.#target = target;
    this.#onHit = onHit;
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.tick(), CHECK_MS).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async tick(): Promise<void> {
    if (this.#checking || this.#reported) return;
    this.#checking = true;
    try {
      const hit = await this.check();
      if (hit !== undefined && !this.#reported) {
        this.#reported = true;
        this.#onHit(hit);
      }
    } finally {
      this.#checking = false;
    }
  }

  /** The first limit the run is past now, if any. */
  async check(): Promise<LimitHit | undefined> {
    return this.checkNow() ?? (await this.#scratch(this.#target.limits));
  }

  /** The same without the scratch walk: the kernel's counters and the sampled limits. */
  checkNow(): LimitHit | undefined {
    const { limits, groups } = this.#target;
    return groups?.hit() ?? this.#sampled(limits, groups);
  }

  /** Processes and memory where no cgroup holds them: counted and summed from /proc. */
  #sampled(limits: RunLimits, groups: RunLimitGroups | undefined): LimitHit | undefined {
    const countPids = limits.pids !== undefined && groups?.holds("pids") !== true;
    const sumMemory = limits.memoryBytes !== undefined && groups?.holds("memory") !== true;
    if (!countPids && !sumMemory) return undefined;
    const members = this.#target.members();
    if (countPids && members.length > limits.pids!) {
      const count = members.length;
      const detail = `the run had ${count} processes, over its limit of ${limits.pids} (counted, no pids cgroup)`;
      return { kind: "limit_pids", detail };
    }
    if (!sumMemory) return undefined;
    const rss = members.reduce((sum, pid) => sum + residentBytes(pid), 0);
    if (rss <= limits.memoryBytes!) return undefined;
    const limit = sizeText(limits.memoryBytes!);
    const detail = `the run's processes held ${sizeText(rss)}, over its limit of ${limit} (sampled, no memory cgroup)`;
    return { kind: "limit_memory", detail };
  }

  async #scratch(limits: RunLimits): Promise<LimitHit | undefined> {
    const dir = this.#target.scratchDir;
    if (limits.scratchBytes === undefined || dir === undefined) return undefined;
    const used = await scratchUsage(dir);
    if (used.entries > MAX_SCRATCH_ENTRIES) {
      return { kind: "limit_disk", detail: `the run's scratch ${dir} held more than ${MAX_SCRATCH_ENTRIES} entries` };
    }
    if (used.bytes <= limits.scratchBytes) return undefined;
    const limit = sizeText(limits.scratchBytes);
    const detail = `the run's scratch ${dir} held ${sizeText(used.bytes)}, over its limit of ${limit}`;
    return { kind: "limit_disk", detail };
  }
}

// ---------------------------------------------------------------------------------------------
// What `doctor` says

export type LimitName = "pids" | "memory" | "cpu" | "disk" | "duration";

/** How a limit is enforced on this host: by the kernel, by turnstream watching the run (weaker), or not at all. */
export interface LimitEnforcement {
  limit: LimitName;
  enforced: "kernel" | "watched" | "none";
  detail: string;
}

function placeText(controller: Controller, place: Place): string {
  const file = LIMIT_FILE[place.version][controller];
  return `cgroup ${place.version} ${controller}, a cgroup per run under ${dirname(place.hostDir)} (${file})`;
}

/** One line per limit: how this host enforces it, and why a stronger way is not in use. */
export function describeLimits(support: LimitSupport = limitSupport()): LimitEnforcement[] {
  const { places, missing } = support;
  const every = `every ${CHECK_MS} ms`;
  const line = (limit: LimitName, enforced: LimitEnforcement["enforced"], detail: string): LimitEnforcement => ({
    limit,
    enforced,
    detail,
  });
  return [
    places.pids !== undefined
      ? line("pids", "kernel", `${placeText("pids", places.pids)}: a fork past it fails; the turn fails limit_pids`)
      : line(
          "pids",
          "watched",
          `no pids cgroup (${missing.pids}): the run's processes are counted ${every} and the turn ended past the ` +
            "limit (limit_pids); a fast fork bomb can outrun the count, and threads are not counted",
        ),
    places.memory !== undefined
      ? line(
          "memory",
          "kernel",
          `${placeText("memory", places.memory)}: past the limit the kernel's OOM killer ends a process and the turn ` +
            "fails limit_memory",
        )
      : line(
          "memory",
          "watched",
          `no memory cgroup (${missing.memory}): the run's resident memory is summed ${every} and the turn ended ` +
            "past the limit (limit_memory); a fast allocation can outrun it (RLIMIT_AS is not used: node and bun " +
            "reserve far more address space than they use)",
        ),
    places.cpu !== undefined
      ? line("cpu", "kernel", `${placeText("cpu", places.cpu)}: the run is throttled to its share of CPU, never failed`)
      : line("cpu", "none", `not enforced: no cpu cgroup (${missing.cpu})`),
    line(
      "disk",
      "watched",
      "each file a run writes is capped at the scratch limit (RLIMIT_FSIZE); the run's scratch (its config home: " +
        `TMPDIR, CLAUDE_CONFIG_DIR) is measured ${every} and the turn fails limit_disk past it; the workspace is ` +
        "capped per file only",
    ),
    line("duration", "watched", "a turn past the maximum turn duration has its tree ended and fails limit_duration"),
  ];
}
