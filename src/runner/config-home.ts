// Per-run CLAUDE_CONFIG_DIR. Concurrent runs must not share one: OAuth refresh tokens are single-use,
// so runs sharing a credential file log each other out, and the CLI writes session files, caches and
// temp folders there. Each run gets `<instanceRoot>/instances/<instanceId>/config-homes/<runId>`
// (0700) holding only a copy of the operator's `.credentials.json`, plus its own temp dirs.
import { createHash, randomUUID } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { rm } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { ClaudeCodeCliError } from "./errors.ts";
import { envAuth } from "./env.ts";
import { silentLogger, type Logger } from "../kernel/index.ts";
import { ConfigHomeOptionsSchema, type ConfigHomeOptions } from "./options.ts";
import { learnConfigSeed, seedConfigHome } from "./config-seed.ts";
import { sweepCgroups } from "./containment.ts";
import { lockState, ownLockContent, writeLock } from "./live-lock.ts";

export const CREDENTIALS_FILE = ".credentials.json";

/** `$XDG_DATA_HOME/turnstream`, else `~/.local/share/turnstream`: durable, not the shared temp dir. */
export function defaultInstanceRoot(env: Record<string, string | undefined> = process.env): string {
  const xdg = env["XDG_DATA_HOME"];
  if (xdg !== undefined && xdg.startsWith("/")) return join(xdg, "turnstream");
  return join(env["HOME"] ?? homedir(), ".local", "share", "turnstream");
}

export function operatorConfigDir(env: Record<string, string | undefined> = process.env): string {
  const dir = env["CLAUDE_CONFIG_DIR"];
  return dir !== undefined && dir.startsWith("/") ? dir : join(env["HOME"] ?? homedir(), ".claude");
}

/** Under the instance directory: homes whose run ended, waiting to be deleted. */
const TRASH_DIR = "trash";

function instanceDir(root: string, instanceId: string): string {
  return join(root, "instances", instanceId);
}

function sha256(path: string): string | undefined {
  try {
    return createHash("sha256").update(readFileSync(path)).digest("hex");
  } catch {
    return undefined;
  }
}

export type AuthSource = "credential" | "env";

export class NoAuthError extends ClaudeCodeCliError {
  constructor(credentialPath: string) {
    super(
      `no Claude credential at ${credentialPath} and no API auth in the environment; run \`claude auth login\` ` +
        `as the operator, or set ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / Bedrock or Vertex settings in the run's env`,
      { kind: "auth", retryable: false },
    );
  }
}

export interface ConfigHome {
  readonly dir: string;
  readonly runId: string;
  readonly instanceId: string;
  /** `credential`: a copy of the operator's credential; `env`: empty home, auth comes from the env. */
  readonly auth: AuthSource;
  /** Variables that point the CLI at this home: CLAUDE_CONFIG_DIR, TMPDIR, CLAUDE_CODE_TMPDIR, XDG_RUNTIME_DIR. */
  readonly env: Readonly<Record<string, string>>;
  /** Removes the home and its live-run lock. Never throws. */
  teardown(): void;
}

export interface CreateConfigHomeOptions extends ConfigHomeOptions {
  /** The environment the CLI will run with, to see whether it carries API auth. */
  runEnv?: Record<string, string | undefined> | undefined;
  logger?: Logger | undefined;
}

// The instance's folders, once made, stay: not worth a system call on every run.
const madeDirs = new Set<string>();

function ensureDir(path: string): void {
  if (madeDirs.has(path)) return;
  mkdirSync(path, { recursive: true, mode: 0o700 });
  madeDirs.add(path);
}

/**
 * Runs `write` in `dirs`; when one was removed under us (an operator cleaning up), makes them again and retries once.
 */
function inDirs(dirs: readonly string[], write: () => void): void {
  for (const dir of dirs) ensureDir(dir);
  try {
    write();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    for (const dir of dirs) madeDirs.delete(dir);
    for (const dir of dirs) ensureDir(dir);
    write();
  }
}

/** One run's home: where it is, its live-run lock, and the hash of its credential copy (if it got one). */
interface RunHomePaths {
  inst: string;
  runId: string;
  dir: string;
  lockPath: string;
}

/** Writes the run's live lock. Lock first, so a concurrent sweep never sees the home without its owner. */
function lockRun(inst: string, runId: string): string {
  const liveDir = join(inst, "live");
  const lockPath = join(liveDir, `${runId}.lock`);
  const lock = ownLockContent({ runId });
  inDirs([liveDir, join(inst, "config-homes")], () => writeLock(lockPath, lock));
  return lockPath;
}

/**
 * Makes the home (temp dirs, seeded config, the credential copy); returns the copy's hash. Undoes itself on failure.
 */
function fillHome(home: RunHomePaths, credentialSource: string | undefined): string | undefined {
  try {
    mkdirSync(home.dir, { mode: 0o700 });
    for (const sub of ["tmp", "run"]) mkdirSync(join(home.dir, sub), { mode: 0o700 });
    seedConfigHome(home.inst, home.dir);
    if (credentialSource === undefined) return undefined;
    writeFileSync(join(home.dir, CREDENTIALS_FILE), readFileSync(credentialSource), { mode: 0o600, flag: "wx" });
    return sha256(join(home.dir, CREDENTIALS_FILE));
  } catch (err) {
    rmSync(home.dir, { recursive: true, force: true });
    rmSync(home.lockPath, { force: true });
    throw err;
  }
}

/** The CLI rewrites its credential when it refreshes an OAuth token, which spends the operator's refresh token. */
function warnIfCredentialRewritten(home: RunHomePaths, copyHash: string | undefined, logger: Logger): void {
  if (copyHash === undefined || sha256(join(home.dir, CREDENTIALS_FILE)) === copyHash) return;
  logger.warn(
    { runId: home.runId, configHome: home.dir },
    "the CLI rewrote the per-run credential copy (likely an OAuth token refresh); the operator's " +
      "credential may now hold a spent refresh token — run `claude auth login` again if later runs fail to authenticate",
  );
}

/** Removes the home and its lock. Never throws. */
function teardownHome(home: RunHomePaths, copyHash: string | undefined, logger: Logger): void {
  const { inst, runId, dir } = home;
  try {
    warnIfCredentialRewritten(home, copyHash, logger);
    learnConfigSeed(inst, dir);
    // Renamed away at once (the home is gone from config-homes when teardown returns), deleted
    // without blocking the event loop. What a crash leaves in trash, sweep removes.
    const trash = join(inst, TRASH_DIR);
    const gone = join(trash, runId);
    inDirs([trash], () => renameSync(dir, gone));
    void rm(gone, { recursive: true, force: true }).catch((err: Error) =>
      logger.warn({ runId, configHome: gone, err: err.message }, "could not remove per-run config home"),
    );
  } catch (err) {
    logger.warn({ runId, configHome: dir, err: (err as Error).message }, "could not move away per-run config home");
    rmSync(dir, { recursive: true, force: true });
  }
  try {
    unlinkSync(home.lockPath);
  } catch {
    // already gone
  }
}

export function createConfigHome(options: CreateConfigHomeOptions): ConfigHome {
  const checked = ConfigHomeOptionsSchema.parse({
    instanceId: options.instanceId,
    instanceRoot: options.instanceRoot,
    runId: options.runId,
    operatorConfigDir: options.operatorConfigDir,
    credential: options.credential,
  });
  const logger = options.logger ?? silentLogger;
  const runId = checked.runId ?? randomUUID();
  const credentialSource = join(checked.operatorConfigDir ?? operatorConfigDir(), CREDENTIALS_FILE);
  // With `credential: none` the run's model access is brokered: its home must hold no credential.
  const hasCredential = checked.credential !== "none" && existsSync(credentialSource);
  if (!hasCredential && envAuth(options.runEnv ?? process.env) === undefined) throw new NoAuthError(credentialSource);

  const inst = instanceDir(checked.instanceRoot ?? defaultInstanceRoot(), checked.instanceId);
  const lockPath = lockRun(inst, runId);
  const home: RunHomePaths = { inst, runId, dir: join(inst, "config-homes", runId), lockPath };
  const copyHash = fillHome(home, hasCredential ? credentialSource : undefined);
  let tornDown = false;
  return {
    dir: home.dir,
    runId,
    instanceId: checked.instanceId,
    auth: hasCredential ? "credential" : "env",
    env: Object.freeze({
      CLAUDE_CONFIG_DIR: home.dir,
      TMPDIR: join(home.dir, "tmp"),
      CLAUDE_CODE_TMPDIR: join(home.dir, "tmp"),
      XDG_RUNTIME_DIR: join(home.dir, "run"),
    }),
    teardown() {
      if (tornDown) return;
      tornDown = true;
      teardownHome(home, copyHash, logger);
    },
  };
}

export interface SweepOptions {
  /** The instance whose orphaned config homes are removed (its own folder only). */
  instanceId: string;
  /** Parent of the instances' folders (default `$XDG_DATA_HOME/turnstream`). */
  instanceRoot?: string;
  /**
   * A home with no lock is removed once its last change is older than this (default 1 hour): it may
   * be one being made. A home whose lock names a process that has ended goes at once.
   */
  olderThanMs?: number;
  /** Where removals and failures are reported. */
  logger?: Logger;
  /** Only say what would be removed. */
  dryRun?: boolean;
}

export interface SweepResult {
  /** Homes removed (or, on a dry run, that would be). */
  removed: string[];
  /** Homes kept: their run's process is running. */
  live: string[];
  /** Homes kept: no lock, and younger than the threshold. */
  young: string[];
  failed: string[];
  /** Why each home was removed or kept. */
  reasons: Record<string, string>;
  /** Entries of the instance's trash (homes of ended runs not yet deleted) removed. */
  trash: number;
  /** Locks of ended runs whose home was already gone, removed. */
  staleLocks: number;
}

/** Removes orphaned homes of this instance (see sweepConfigHomes) and dead workers' run cgroups. Never throws. */
export function sweep(options: SweepOptions): SweepResult {
  // Dead workers' run cgroups too (any instance's: a cgroup is named by its host process, not the instance).
  if (options.dryRun !== true) sweepCgroups({ logger: options.logger ?? silentLogger });
  return sweepConfigHomes(options);
}

/** Removes the instance's config homes no live process owns, its trash, and its dead runs' locks. Never throws. */
export function sweepConfigHomes(options: SweepOptions): SweepResult {
  const result: SweepResult = { removed: [], live: [], young: [], failed: [], reasons: {}, trash: 0, staleLocks: 0 };
  const logger = options.logger ?? silentLogger;
  try {
    const id = ConfigHomeOptionsSchema.shape.instanceId.safeParse(options.instanceId);
    if (!id.success) return result;
    const inst = instanceDir(options.instanceRoot ?? defaultInstanceRoot(), id.data);
    const dryRun = options.dryRun === true;
    result.trash = emptyTrash(inst, dryRun, logger);
    const ctx: HomeSweep = {
      inst,
      threshold: options.olderThanMs ?? 60 * 60 * 1000,
      now: Date.now(),
      dryRun,
      logger,
    };
    for (const name of listNames(join(inst, "config-homes"))) sweepHome(ctx, name, result);
    result.staleLocks = removeStaleLocks(ctx);
  } catch (err) {
    logger.warn({ err: (err as Error).message }, "config home sweep failed");
  }
  return result;
}

interface HomeSweep {
  inst: string;
  threshold: number;
  now: number;
  dryRun: boolean;
  logger: Logger;
}

function listNames(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Whatever is in trash belongs to no run: its owner moved it there to delete it. */
function emptyTrash(inst: string, dryRun: boolean, logger: Logger): number {
  const trash = join(inst, TRASH_DIR);
  const count = listNames(trash).length;
  if (dryRun || count === 0) return count;
  try {
    rmSync(trash, { recursive: true, force: true });
  } catch (err) {
    logger.warn({ err: (err as Error).message }, "sweep could not empty the config-home trash");
  }
  return count;
}

function sweepHome(ctx: HomeSweep, name: string, result: SweepResult): void {
  try {
    const lockPath = join(ctx.inst, "live", `${name}.lock`);
    const state = lockState(lockPath);
    if (state === "live") {
      result.live.push(name);
      result.reasons[name] = "its run's process is running";
      return;
    }
    const path = join(ctx.inst, "config-homes", name);
    if (state === "none" && ctx.now - statSync(path).mtimeMs < ctx.threshold) {
      result.young.push(name);
      result.reasons[name] = "no lock yet and recently changed: it may be being made";
      return;
    }
    if (!ctx.dryRun) {
      rmSync(path, { recursive: true, force: true });
      rmSync(lockPath, { force: true });
    }
    result.removed.push(name);
    result.reasons[name] =
      state === "dead" ? "its run's process has ended" : "no lock, and unchanged for longer than the threshold";
  } catch (err) {
    result.failed.push(name);
    result.reasons[name] = `could not remove: ${(err as Error).message}`;
    ctx.logger.warn({ home: name, err: (err as Error).message }, "sweep could not remove an orphaned config home");
  }
}

/** Locks left by a run that ended between its lock and its home, or between its home's removal and the lock's. */
function removeStaleLocks(ctx: HomeSweep): number {
  let count = 0;
  for (const file of listNames(join(ctx.inst, "live"))) {
    if (!file.endsWith(".lock") || existsSync(join(ctx.inst, "config-homes", file.slice(0, -5)))) continue;
    const path = join(ctx.inst, "live", file);
    if (lockState(path) !== "dead") continue;
    if (!ctx.dryRun) rmSync(path, { force: true });
    count++;
  }
  return count;
}
