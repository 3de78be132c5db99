// One CLI turn: spawn `claude -p --output-format stream-json --verbose` as leader of its own process
// group, prompt on stdin, stream stdout lines as they come, and settle the outcome from the result
// envelope (it outranks the exit code; no result line is a failure). Timeouts, inactivity, abort and
// kill() end the whole tree: SIGTERM, then SIGKILL after killGraceMs on a referenced timer. The CLI
// starts in a cgroup (or pid namespace) of its own where the host allows (containment.ts), so the
// tree includes what left the CLI's session and dropped its marker.
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { createLineSplitter, parseItem, RunClassifier, type ErrorKind, type ParsedLine } from "../protocol/index.ts";
import { buildArgs } from "./args.ts";
import { Channel } from "./channel.ts";
import { createConfigHome, type AuthSource, type ConfigHome } from "./config-home.ts";
import { buildEnv, envAuth } from "./env.ts";
import {
  badOptions,
  ClaudeCodeCliError,
  LimitExceededError,
  LostSessionError,
  type RunnerErrorKind,
} from "./errors.ts";
import {
  fileBlocksOf,
  isLimitKind,
  limitSupport,
  LimitWatch,
  RunLimitGroups,
  sizeText,
  type LimitHit,
} from "./limits.ts";
import { silentLogger, stringField, type Logger } from "../kernel/index.ts";
import {
  NATIVE_SKILLS_REFUSED,
  validateRunTurnOptions,
  type CheckedRunTurnOptions,
  type RunTurnOptions,
} from "./options.ts";
import {
  containment,
  ContainmentError,
  launchCommand,
  launchFailure,
  RunCgroup,
  RunScope,
  type ContainmentKind,
  type LaunchCommand,
} from "./containment.ts";
import { ProcessTree, TREE_MARKER_VAR, trackTree } from "./process-tree.ts";
import { resolveClaudeBin } from "./resolve-bin.ts";
import { runSettings } from "./sandbox.ts";
import { captureSessionFile, restoreSessionFile } from "./session-file.ts";
import { guardGit } from "./git-guard.ts";
import { injectSkillsForRun } from "./skill-injection.ts";
import { installedSkills, prepareSkillAddDir, type ListedSkill } from "./skills.ts";
import { startWatchdog, type WatchdogHandle } from "./watchdog.ts";
import { workspaceContext } from "./workspace-context.ts";

export type CliErrorKind = ErrorKind | RunnerErrorKind;

export interface TurnOutcome {
  /** Session id the CLI reported (init or result line). */
  sessionId: string | undefined;
  /** The last `result` line, as printed. */
  result: Record<string, unknown>;
  resultText: string | undefined;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  durationMs: number;
  lineCount: number;
  pid: number;
  /** Where API auth came from: per-run credential copy, the env (empty home), or inherited as is. */
  auth: AuthSource | "inherited";
  /** With `configHome`: the session file's bytes, captured before the home was removed. */
  sessionFile: Buffer | undefined;
}

export interface TurnHandle {
  /** Every stdout line, parsed, in order, as the CLI prints it. Single consumer. */
  readonly lines: AsyncIterable<ParsedLine>;
  /** stderr, line by line (also given to `onStderr`). Single consumer. */
  readonly stderr: AsyncIterable<string>;
  /** Resolves on a successful result; rejects with ClaudeCodeCliError / LostSessionError otherwise. */
  readonly outcome: Promise<TurnOutcome>;
  /**
   * Settles once the CLI process itself has exited (or never started), before its stdout is drained
   * and whatever it left running is reaped: the moment its CPU is free for the next run.
   */
  readonly exited: Promise<void>;
  /**
   * The CLI's pid (leader of its own process group); with pid-namespace containment, the pid of the
   * `unshare` in front of it.
   */
  readonly pid: number | undefined;
  readonly configHome: ConfigHome | undefined;
  /** Value of TURNSTREAM_TREE in the CLI's environment: every process of this run's tree inherits it. */
  readonly treeMarker: string;
  /** Pid of the host's watchdog, shared by all its runs (undefined with `watchdog: false`). */
  readonly watchdogPid: number | undefined;
  /** How this run's processes are held together (see describeContainment). */
  readonly containment: ContainmentKind;
  /** The run's cgroup folder, with the cgroup kinds; removed once the run's processes are gone. */
  readonly cgroup: string | undefined;
  /** The cgroups holding the run's limits beyond its own (v1 hierarchies); removed likewise. */
  readonly limitCgroups: readonly string[];
  /** Ends the whole tree (TERM, then KILL after killGraceMs); the outcome rejects with kind `killed`. */
  kill(): void;
}

export interface RunTurnExtras {
  /** Restore this session file (bytes from captureSessionFile) for `resume` before spawning. */
  sessionFile?: Uint8Array | undefined;
}

const STDERR_KEEP = 64 * 1024;

/**
 * IS_SANDBOX=1 is how the CLI lets root skip permissions. Only `sandboxed: true` may claim it, so it is
 * removed from whatever env the run inherits or is given, and a bypass as root without it is refused
 * here, before the CLI would refuse it with a less helpful message.
 */
function sandboxClaim(options: CheckedRunTurnOptions): "1" | undefined {
  const bypass =
    options.skipPermissions === true
      ? "skipPermissions"
      : options.permissionMode === "bypassPermissions"
        ? "permissionMode"
        : undefined;
  if (bypass === undefined || process.getuid?.() !== 0) return undefined;
  if (options.sandboxed !== true) {
    throw badOptions(
      bypass,
      "as root the CLI only skips permissions with IS_SANDBOX=1; set `sandboxed: true` if this runs in a sandbox, or drop " +
        (bypass === "skipPermissions" ? "skipPermissions" : 'permissionMode "bypassPermissions"'),
    );
  }
  return "1";
}

/**
 * Where the caller's skills go. claude-md: files in the cwd the model reads, listed in its CLAUDE.md
 * when the workspace is trusted (the CLI loads that file), else in the appended system prompt, where an
 * untrusted workspace's CLAUDE.md goes too (so its CLAUDE.md is never written). add-dir (a trusted
 * workspace only, see validateRunTurnOptions): an added directory the CLI's own skill discovery loads.
 * An untrusted turn never gets a native skill: one could run its front matter hooks and `!` lines
 * outside supervision.
 */
function offerSkills(options: CheckedRunTurnOptions, files: RunFiles): { addDirs: string[]; listed: ListedSkill[] } {
  if (options.skills === undefined || options.skills.length === 0) return { addDirs: [], listed: [] };
  const trusted = options.trustWorkspace === true;
  if ((options.skillsMode ?? "claude-md") === "claude-md") {
    // Undone with the run's other files, once its tree is gone: the checkout is left as it was found.
    files.onCleanup(injectSkillsForRun(options.cwd, options.skills, { listInClaudeMd: trusted }));
    return { addDirs: [], listed: trusted ? [] : installedSkills(options.cwd, options.skills) };
  }
  if (!trusted) throw badOptions("skillsMode", NATIVE_SKILLS_REFUSED);
  const added = prepareSkillAddDir(options.skills, files.scratchDir());
  return { addDirs: [added.dir], listed: [] };
}

/** The appended system prompt: the caller's, then what an untrusted workspace still offers as text. */
function systemPromptAppendix(options: CheckedRunTurnOptions, skills: readonly ListedSkill[]): string | undefined {
  const context = options.trustWorkspace === true ? undefined : workspaceContext(options.cwd, skills);
  const parts = [options.appendSystemPrompt, context].filter((p): p is string => p !== undefined);
  return parts.length === 0 ? undefined : parts.join("\n\n");
}

function auth(
  options: CheckedRunTurnOptions,
  env: Record<string, string>,
): { home: ConfigHome | undefined; source: AuthSource | "inherited" } {
  if (options.configHome === undefined) return { home: undefined, source: "inherited" };
  const home = createConfigHome({ ...options.configHome, runEnv: env, logger: options.logger ?? silentLogger });
  return { home, source: home.auth };
}

/** How long a run's processes get between TERM and KILL unless `killGraceMs` says otherwise. */
const DEFAULT_KILL_GRACE_MS = 2000;

/**
 * Spawns the real `claude -p` for one turn: its stdout lines as they come, and the outcome (or a typed error) once it
 * ends.
 */
export function runTurn(options: RunTurnOptions & RunTurnExtras): TurnHandle {
  const { sessionFile, ...rest } = options;
  const ctx = startCli(validateRunTurnOptions(rest), sessionFile, "prompt");
  return supervise(ctx.child, ctx);
}

/**
 * How the CLI reads its input: `prompt` (one prompt on stdin, then EOF) or `stream-json` (one user
 * message per stdin line, for a process that stays up between turns).
 */
export type CliInput = "prompt" | "stream-json";

/**
 * Starts the CLI for checked options: the env (caller's overlay, sandbox claim, tree marker), the
 * binary, the per-run config home and skills, the argv, containment and the spawn. A cold turn and a
 * warm process start the same way, so a warm process behaves as the cold runs it replaces.
 */
export function startCli(
  options: CheckedRunTurnOptions,
  sessionFile: Uint8Array | undefined,
  input: CliInput,
): SuperviseContext & { child: ChildProcess } {
  checkSessionFile(options, sessionFile);
  const logger = options.logger ?? silentLogger;
  const marker = randomUUID();
  const overlay: Record<string, string | undefined> = {
    ...options.env,
    IS_SANDBOX: sandboxClaim(options),
    [TREE_MARKER_VAR]: marker,
  };
  const env = buildEnv({ overlay, isolate: options.isolate });
  if (options.trustWorkspace !== true) guardGit(env);
  // From the host's own environment, never the run's: an overlay must not pick the program.
  const bin = resolveClaudeBin({ claudeBin: options.claudeBin });
  const files = new RunFiles(logger, env);
  const { home, authSource, spawned, scratchDir } = launch(options, env, bin, marker, files, sessionFile, input);
  return {
    child: spawned.child,
    o: options,
    logger,
    killGraceMs: options.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
    marker,
    contained: spawned.contained,
    cgroup: spawned.cgroup,
    limitGroups: spawned.limitGroups,
    watchdog: spawned.watchdog,
    scratchDir,
    launch: spawned.launch,
    home,
    authSource,
    cleanup: () => files.cleanup(),
  };
}

function checkSessionFile(options: CheckedRunTurnOptions, sessionFile: Uint8Array | undefined): void {
  if (sessionFile === undefined) return;
  if (!(sessionFile instanceof Uint8Array)) throw badOptions("sessionFile", "must be bytes");
  if (options.resume === undefined || options.configHome === undefined) {
    throw badOptions("sessionFile", "needs `resume` and `configHome` (it is restored into the per-run home)");
  }
}

/** What a run created on disk (config home, scratch folder), undone in reverse order once. */
class RunFiles {
  readonly #undo: Array<() => void> = [];
  readonly #logger: Logger;
  /** The run's env: read when the scratch folder is made, after the config home set its TMPDIR. */
  readonly #env: Record<string, string>;
  #scratch: string | undefined;

  constructor(logger: Logger, env: Record<string, string>) {
    this.#logger = logger;
    this.#env = env;
  }

  onCleanup(undo: () => void): void {
    this.#undo.push(undo);
  }

  /** The run's private scratch folder, made on first use. */
  scratchDir(): string {
    if (this.#scratch === undefined) {
      const dir = mkdtempSync(join(this.#env["TMPDIR"] ?? tmpdir(), "turnstream-run-"));
      this.#scratch = dir;
      this.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
    }
    return this.#scratch;
  }

  cleanup(): void {
    for (const undo of this.#undo.splice(0).reverse()) {
      try {
        undo();
      } catch (err) {
        this.#logger.warn({ err: (err as Error).message }, "run cleanup failed");
      }
    }
  }
}

/** What a run has on disk before its CLI starts. */
interface PreparedFiles {
  home: ConfigHome | undefined;
  authSource: AuthSource | "inherited";
  /** What the scratch limit measures: the config home, or the TMPDIR made for the run. */
  scratchDir: string | undefined;
}

/** The per-run config home (with the restored session file), the skills, and the CLI's argv. */
function prepareRun(
  options: CheckedRunTurnOptions,
  env: Record<string, string>,
  files: RunFiles,
  sessionFile: Uint8Array | undefined,
  input: CliInput,
): PreparedFiles & { args: string[] } {
  const { home, source: authSource } = auth(options, env);
  if (home !== undefined) {
    files.onCleanup(() => home.teardown());
    Object.assign(env, home.env);
    if (sessionFile !== undefined) restoreSessionFile(home.dir, options.cwd, options.resume!, sessionFile);
  }
  const scratchDir = home?.dir ?? ownTmpdir(options, env, files);
  const skills = offerSkills(options, files);
  const settings = runSettings(
    { ...options, addDirs: [...(options.addDirs ?? []), ...skills.addDirs], configHomeDir: home?.dir },
    env,
    files,
  );
  const args = buildArgs({ ...options, settingsFile: settings.file, appendSystemPrompt: undefined }, skills.addDirs);
  if (input === "stream-json") args.splice(1, 0, "--input-format", "stream-json");
  const appendix = systemPromptAppendix(options, skills.listed);
  // A sandboxed run's appendix sits beside its composed settings, in the folder no tool may write.
  if (appendix !== undefined) args.push(...appendixArgs(appendix, settings.privateDir ?? files.scratchDir()));
  return { home, authSource, args, scratchDir };
}

/** The appended system prompt as a file in `folder` (not argv: argv is readable by every user through /proc). */
function appendixArgs(appendix: string, folder: string): string[] {
  const appendixFile = join(folder, "append-system-prompt.txt");
  writeFileSync(appendixFile, appendix, { mode: 0o600 });
  return ["--append-system-prompt-file", appendixFile];
}

/**
 * A run with a scratch limit and no config home gets a TMPDIR of its own, the scratch the limit
 * measures (the host's temp dir is shared with everything else on the machine).
 */
function ownTmpdir(options: CheckedRunTurnOptions, env: Record<string, string>, files: RunFiles): string | undefined {
  if (options.limits?.scratchBytes === undefined) return undefined;
  const dir = files.scratchDir();
  env["TMPDIR"] = dir;
  env["CLAUDE_CODE_TMPDIR"] = dir;
  return dir;
}

interface SpawnedCli {
  child: ChildProcess;
  cgroup: RunCgroup | undefined;
  limitGroups: RunLimitGroups | undefined;
  launch: LaunchCommand;
  contained: ContainmentKind;
  /** The run as the host's watchdog knows it (announced before the spawn). */
  watchdog: WatchdogHandle | undefined;
}

/** Prepares the run's files and spawns the CLI; everything this creates is undone if spawning fails. */
function launch(
  options: CheckedRunTurnOptions,
  env: Record<string, string>,
  bin: string,
  marker: string,
  files: RunFiles,
  sessionFile: Uint8Array | undefined,
  input: CliInput,
): PreparedFiles & { spawned: SpawnedCli } {
  try {
    const { args, ...prepared } = prepareRun(options, env, files, sessionFile, input);
    return { ...prepared, spawned: spawnContained(options, env, bin, args, marker, options.logger ?? silentLogger) };
  } catch (err) {
    files.cleanup();
    throw err;
  }
}

/**
 * Spawns the CLI inside the run's containment. The run's cgroup exists before the CLI does, and the CLI enters it
 * before it can fork anything.
 */
function spawnContained(
  options: CheckedRunTurnOptions,
  env: Record<string, string>,
  bin: string,
  args: string[],
  marker: string,
  logger: Logger,
): SpawnedCli {
  const chosen = containment(logger);
  const cgroup = chosen.hostDir === undefined ? undefined : RunCgroup.create(chosen, marker);
  let limitGroups: RunLimitGroups | undefined;
  let watchdog: WatchdogHandle | undefined;
  try {
    const limits = options.limits;
    limitGroups =
      limits === undefined ? undefined : RunLimitGroups.create(limitSupport(chosen, logger), cgroup, marker, limits);
    const bounds = { enter: limitGroups?.enter ?? [], fileBlocks: fileBlocksOf(options.limits) };
    const launch = launchCommand(chosen, cgroup, bin, args, bounds);
    logger.debug(
      { bin, cwd: options.cwd, flags: args.filter((a) => a.startsWith("-")), containment: chosen.kind },
      "spawning claude",
    );
    // Announced before the spawn: a host killed the moment after still has a watchdog that knows the run.
    const killGraceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
    const watched = { marker, killGraceMs, cgroup: cgroup?.path, limitCgroups: limitGroups?.enter };
    watchdog = options.watchdog === false ? undefined : startWatchdog(watched);
    const child = spawn(launch.file, launch.args, {
      cwd: options.cwd,
      env,
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    return { child, cgroup, limitGroups, launch, contained: chosen.kind, watchdog };
  } catch (err) {
    watchdog?.stop();
    void limitGroups?.release();
    cgroup?.remove();
    throw err;
  }
}

/** What supervising one spawned CLI needs to know about how it was started. */
export interface SuperviseContext {
  o: CheckedRunTurnOptions;
  logger: Logger;
  killGraceMs: number;
  marker: string;
  contained: ContainmentKind;
  /** The run's cgroup, which the CLI entered before it exec'd. */
  cgroup: RunCgroup | undefined;
  /** The cgroups holding the run's limits beyond its own cgroup, entered likewise. */
  limitGroups: RunLimitGroups | undefined;
  /** The run as the host's watchdog knows it; undefined with `watchdog: false`. */
  watchdog: WatchdogHandle | undefined;
  /** What the scratch limit measures: the run's config home, or the TMPDIR made for it. */
  scratchDir: string | undefined;
  /** What was spawned: the CLI, or a launcher (sh, unshare) that execs it. */
  launch: LaunchCommand;
  home: ConfigHome | undefined;
  authSource: AuthSource | "inherited";
  cleanup: () => void;
}

/** What ends a run (or one turn of a warm process) early: the caller's signal and its two deadlines. */
export type TurnDeadlines = Pick<CheckedRunTurnOptions, "signal" | "timeoutMs" | "inactivityTimeoutMs">;

/**
 * Ending the run's process tree: on a deadline (timeoutMs, inactivityTimeoutMs, the caller's abort
 * signal, the wall-time limit), on a limit hit, on kill(), and after the CLI exits (whatever it left
 * running). TERM first, KILL after the grace period.
 */
export class TreeEnding {
  /** Why the tree was ended before the CLI finished, if it was. */
  reason: RunnerErrorKind | undefined;
  /** With a limit kind as the reason: what showed the limit was hit. */
  limitDetail: string | undefined;
  readonly #scope: RunScope;
  readonly #groups: RunLimitGroups | undefined;
  readonly #watch: LimitWatch | undefined;
  #duration: NodeJS.Timeout | undefined;
  readonly #o: CheckedRunTurnOptions;
  /** The deadlines armed now (none between a warm process's turns). */
  #armed: TurnDeadlines | undefined;
  readonly #logger: Logger;
  readonly #graceMs: number;
  readonly #pid: number | undefined;
  #timeout: NodeJS.Timeout | undefined;
  #inactivity: NodeJS.Timeout | undefined;
  #killTimer: NodeJS.Timeout | undefined;
  #killDeadline = 0;
  #reaped: Promise<void> | undefined;
  readonly #onAbort = (): void => this.end("aborted");

  constructor(scope: RunScope, ctx: SuperviseContext, pid: number | undefined) {
    this.#scope = scope;
    this.#o = ctx.o;
    this.#logger = ctx.logger;
    this.#graceMs = ctx.killGraceMs;
    this.#pid = pid;
    this.#groups = ctx.limitGroups;
    const limits = ctx.o.limits;
    if (limits !== undefined && pid !== undefined) {
      const target = { limits, groups: ctx.limitGroups, members: () => scope.members(), scratchDir: ctx.scratchDir };
      this.#watch = new LimitWatch(target, (hit) => this.#hit(hit));
      this.#watch.start();
    }
  }

  /**
   * A limit the kernel or the sampling shows hit right now (not the scratch, which takes a walk); the
   * tree is ended for it. For a warm turn's result line, which settles before the next look.
   */
  limitHitNow(): LimitHit | undefined {
    const hit = this.#watch?.checkNow();
    if (hit !== undefined) this.#hit(hit);
    return hit;
  }

  #hit(hit: LimitHit): void {
    if (this.reason !== undefined) return;
    this.limitDetail = hit.detail;
    this.end(hit.kind);
  }

  /** Starts the deadlines: the caller's signal, timeoutMs, inactivityTimeoutMs (the run's, or one warm turn's). */
  arm(deadlines: TurnDeadlines = this.#o): void {
    this.#armed = deadlines;
    const { signal, timeoutMs } = deadlines;
    if (signal !== undefined) {
      if (signal.aborted) queueMicrotask(this.#onAbort);
      else signal.addEventListener("abort", this.#onAbort, { once: true });
    }
    if (timeoutMs !== undefined) this.#timeout = setTimeout(() => this.end("timeout"), timeoutMs);
    const durationMs = this.#o.limits?.durationMs;
    if (durationMs !== undefined) {
      const hit: LimitHit = { kind: "limit_duration", detail: `the turn ran past its limit of ${durationMs} ms` };
      this.#duration = setTimeout(() => this.#hit(hit), durationMs);
    }
    this.activity();
  }

  /**
   * Once the tree is gone, before its cgroups are: a limit hit since the last look (the OOM killer
   * that ended the CLI itself, a scratch filled at the end) still fails the run.
   */
  async #lastLook(): Promise<void> {
    const watch = this.#watch;
    if (watch === undefined) return;
    watch.stop();
    if (this.reason !== undefined) return;
    const hit = await watch.check().catch(() => undefined);
    if (hit === undefined || this.reason !== undefined) return;
    this.reason = hit.kind;
    this.limitDetail = hit.detail;
  }

  /** The CLI printed something: the inactivity deadline starts over. */
  activity(): void {
    const ms = this.#armed?.inactivityTimeoutMs;
    if (ms === undefined || this.reason !== undefined) return;
    if (this.#inactivity === undefined) this.#inactivity = setTimeout(() => this.end("inactivity"), ms);
    else this.#inactivity.refresh();
  }

  /** Stops the deadlines: the run (or the warm turn) is over. */
  disarm(): void {
    clearTimeout(this.#timeout);
    clearTimeout(this.#inactivity);
    clearTimeout(this.#duration);
    this.#timeout = this.#inactivity = this.#duration = undefined;
    this.#armed?.signal?.removeEventListener("abort", this.#onAbort);
    this.#armed = undefined;
  }

  end(reason: RunnerErrorKind): void {
    if (this.reason !== undefined || this.#scope.tree === undefined) return;
    this.reason = reason;
    this.#logger.info({ pid: this.#pid, reason }, "ending claude process tree");
    this.#terminate();
    this.#killTimer = setTimeout(() => {
      this.#scope.signal("SIGKILL");
    }, this.#graceMs);
  }

  #terminate(): void {
    this.#scope.signal("SIGTERM");
    this.#killDeadline = Date.now() + this.#graceMs;
  }

  /**
   * After the CLI exits, ends whatever it left running (background Bash children): TERM (if not sent
   * already), then checks every 100 ms and KILLs what is left at the deadline. Then the run's cgroup
   * is removed. Once per run; later calls share the first one's promise.
   */
  reap(): Promise<void> {
    this.#reaped ??= new Promise<void>((resolve) => {
      clearTimeout(this.#killTimer);
      const done = (): void =>
        void this.#lastLook().then(async () => {
          await this.#scope.release(this.#logger);
          await this.#groups?.release();
          resolve();
        });
      if (this.#scope.members().length === 0) return done();
      if (this.reason === undefined) this.#terminate();
      const check = (): void => {
        if (this.#scope.members().length === 0) return done();
        if (Date.now() >= this.#killDeadline) {
          this.#scope.signal("SIGKILL");
          return done();
        }
        // Referenced on purpose: the host must not exit before the SIGKILL went out.
        setTimeout(check, Math.min(100, Math.max(0, this.#killDeadline - Date.now())));
      };
      check();
    });
    return this.#reaped;
  }
}

/** The CLI's stdout: split into lines, parsed, classified and passed on; keeps what the outcome needs. */
export class StdoutLines {
  readonly channel = new Channel<ParsedLine>();
  count = 0;
  /** Session id the CLI reported (init or result line). */
  sessionId: string | undefined;
  lastResult: Record<string, unknown> | undefined;
  lastKind: ErrorKind | undefined;
  readonly #splitter = createLineSplitter();
  #classifier = new RunClassifier();
  /** Where each parsed line goes: the channel, unless a caller that stays up between turns takes them. */
  readonly #sink: (parsed: ParsedLine) => void;

  constructor(sink?: (parsed: ParsedLine) => void) {
    this.#sink = sink ?? ((p) => this.channel.push(p));
  }

  /** A new turn of a process that stays up: counts, result and classification start over. */
  beginTurn(): void {
    this.count = 0;
    this.lastResult = undefined;
    this.lastKind = undefined;
    this.#classifier = new RunClassifier();
  }

  push(chunk: Buffer): void {
    for (const item of this.#splitter.push(chunk)) this.#add(parseItem(item));
  }

  /** The last line, if it had no newline. */
  flush(): void {
    for (const item of this.#splitter.end()) this.#add(parseItem(item));
  }

  #add(parsed: ParsedLine): void {
    this.count++;
    if (parsed.category === "known" || parsed.category === "unknown") {
      const line = parsed.line;
      if (line["type"] === "system" && line["subtype"] === "init")
        this.sessionId = stringField(line, "session_id") ?? this.sessionId;
      if (line["type"] === "result") {
        this.lastResult = line;
        this.sessionId = stringField(line, "session_id") ?? this.sessionId;
      }
    }
    const kind = this.#classifier.add(parsed);
    if (kind !== undefined) this.lastKind = kind;
    this.#sink(parsed);
  }
}

/** The CLI's stderr: decoded, split into lines for the channel and `onStderr`, its tail kept for errors. */
export class StderrLines {
  readonly channel = new Channel<string>();
  tail = "";
  readonly #decoder = new StringDecoder("utf8");
  #pending = "";
  readonly #onStderr: ((line: string) => void) | undefined;
  readonly #logger: Logger;

  readonly #keepLines: boolean;

  /**
   * `keepLines: false` for a process that stays up: its lines go to `onStderr` only, never piling up in the channel.
   */
  constructor(onStderr: ((line: string) => void) | undefined, logger: Logger, keepLines = true) {
    this.#onStderr = onStderr;
    this.#logger = logger;
    this.#keepLines = keepLines;
  }

  push(chunk: Buffer): void {
    const parts = (this.#pending + this.#decoder.write(chunk)).split("\n");
    this.#pending = parts.pop()!;
    for (const line of parts) this.#emit(line.endsWith("\r") ? line.slice(0, -1) : line);
  }

  /** The last line, if it had no newline. */
  flush(): void {
    const rest = this.#decoder.end() + this.#pending;
    if (rest !== "") this.#emit(rest);
  }

  #emit(line: string): void {
    this.tail = (this.tail + line + "\n").slice(-STDERR_KEEP);
    if (this.#keepLines) this.channel.push(line);
    try {
      this.#onStderr?.(line);
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, "onStderr callback threw");
    }
  }
}

/** A spawned CLI's tree and what ends it: the scope of its processes, the host's exit hook, the watchdog. */
export interface WatchedTree {
  scope: RunScope;
  ending: TreeEnding;
  watchdog: WatchdogHandle | undefined;
  /** Stops the exit hook tracking the tree. */
  untrack: (() => void) | undefined;
}

/** Starts watching a spawned CLI's tree (cold runs and warm processes alike). */
export function watchTree(child: ChildProcess, ctx: SuperviseContext): WatchedTree {
  // The run's processes: its cgroup (everything the CLI started, wherever it went) and the /proc walk.
  const scope = new RunScope(child.pid === undefined ? undefined : new ProcessTree(child.pid, ctx.marker), ctx.cgroup);
  const untrack = child.pid === undefined ? undefined : trackTree(scope);
  const watchdog = ctx.watchdog;
  if (child.pid === undefined) watchdog?.stop();
  else watchdog?.started(child.pid);
  return { scope, ending: new TreeEnding(scope, ctx, child.pid), watchdog, untrack };
}

/** Watches one spawned CLI: its deadlines, its output, and, once it closed and its tree is gone, its outcome. */
function supervise(child: ChildProcess, ctx: SuperviseContext): TurnHandle {
  const { o: options } = ctx;
  const started = Date.now();
  const { ending, watchdog, untrack } = watchTree(child, ctx);
  ending.arm();

  const stdout = new StdoutLines();
  const stderr = new StderrLines(options.onStderr, ctx.logger);
  connectStdio(child, options.prompt, ending, stdout, stderr);
  let spawnError: Error | undefined;
  child.on("error", (err) => {
    spawnError = err;
  });

  let onExited!: () => void;
  const exited = new Promise<void>((r) => (onExited = r));
  child.on("exit", () => {
    onExited();
    // A tick later, so whoever waits on `exited` (the next run, for its slot) goes before the scan.
    setImmediate(() => void ending.reap());
  });

  const outcome = new Promise<TurnOutcome>((resolve, reject) => {
    child.on("close", (code: number | null, sig: NodeJS.Signals | null) => {
      void ending.reap().then(() => {
        ending.disarm();
        watchdog?.stop();
        untrack?.();
        const sessionFile = finishOutput(ctx, stdout, stderr);
        const end: RunEnd = {
          code,
          sig,
          spawnError,
          ending: ending.reason,
          limitDetail: ending.limitDetail,
          stdout,
          stderrTail: stderr.tail,
          started,
          pid: child.pid!,
          sessionFile,
        };
        try {
          resolve(settleOutcome(ctx, end));
        } catch (err) {
          reject(err as Error);
        }
      });
    });
  });
  outcome.catch(() => {});
  void outcome.then(onExited, onExited);

  return {
    lines: stdout.channel,
    stderr: stderr.channel,
    outcome,
    exited,
    pid: child.pid,
    configHome: ctx.home,
    treeMarker: ctx.marker,
    watchdogPid: watchdog?.pid,
    containment: ctx.contained,
    cgroup: ctx.cgroup?.path,
    limitCgroups: ctx.limitGroups?.enter ?? [],
    kill: () => ending.end("killed"),
  };
}

/** The prompt goes to stdin; stdout and stderr feed the line pumps (stdout output also counts as activity). */
function connectStdio(
  child: ChildProcess,
  prompt: string | undefined,
  ending: TreeEnding,
  stdout: StdoutLines,
  stderr: StderrLines,
): void {
  child.stdout!.on("data", (chunk: Buffer) => {
    ending.activity();
    stdout.push(chunk);
  });
  child.stderr!.on("data", (chunk: Buffer) => stderr.push(chunk));
  child.stdin!.on("error", () => {
    // The CLI may exit before reading stdin; its exit status says what happened.
  });
  child.stdin!.end(prompt ?? "");
}

/**
 * Once the tree is gone: passes on the last lines, keeps the session file, removes the run's files, ends the channels.
 */
function finishOutput(ctx: SuperviseContext, stdout: StdoutLines, stderr: StderrLines): Buffer | undefined {
  stderr.flush();
  stdout.flush();
  const sessionFile = captureSession(ctx, stdout.sessionId);
  ctx.cleanup();
  stdout.channel.end();
  stderr.channel.end();
  return sessionFile;
}

/** With a per-run home, the session file's bytes, taken before the home is removed. */
export function captureSession(ctx: SuperviseContext, sessionId: string | undefined): Buffer | undefined {
  if (ctx.home === undefined || sessionId === undefined) return undefined;
  try {
    return captureSessionFile(ctx.home.dir, ctx.o.cwd, sessionId);
  } catch (err) {
    ctx.logger.warn({ err: (err as Error).message }, "could not capture the session file");
    return undefined;
  }
}

/** How the run ended, as the outcome needs it. */
export interface RunEnd {
  code: number | null;
  sig: NodeJS.Signals | null;
  spawnError: Error | undefined;
  /** Why the tree was ended early (timeout, inactivity, abort, kill, a limit), if it was. */
  ending: RunnerErrorKind | undefined;
  /** With a limit kind as `ending`: what showed it. */
  limitDetail?: string | undefined;
  stdout: StdoutLines;
  stderrTail: string;
  started: number;
  pid: number;
  sessionFile: Buffer | undefined;
}

/**
 * The run's outcome, or throws its error. In order: the launch or spawn failed; the CLI printed a
 * successful result (it outranks the exit code and an ending that came too late); the tree was ended;
 * otherwise the result line's error, or no result at all.
 */
export function settleOutcome(ctx: SuperviseContext, end: RunEnd): TurnOutcome {
  const fields = { exitCode: end.code, signal: end.sig, stderr: end.stderrTail };
  const startError = startFailure(ctx, end, fields);
  if (startError !== undefined) throw startError;
  // A limit outranks even a successful result: the run did what its bounds forbid.
  const limitError = limitFailure(ctx.o, end, fields);
  if (limitError !== undefined) throw limitError;
  const { stdout } = end;
  if (stdout.lastKind === "ok" && stdout.lastResult !== undefined) {
    return {
      sessionId: stdout.sessionId,
      result: stdout.lastResult,
      resultText: stringField(stdout.lastResult, "result"),
      exitCode: end.code,
      signal: end.sig,
      durationMs: Date.now() - end.started,
      lineCount: stdout.count,
      pid: end.pid,
      auth: ctx.authSource,
      sessionFile: end.sessionFile,
    };
  }
  if (end.ending !== undefined) {
    throw new ClaudeCodeCliError(`the claude CLI ${endingText(ctx.o, end.ending)}; its process tree was ended`, {
      ...fields,
      kind: end.ending,
    });
  }
  throw resultFailure(ctx.o, end, fields);
}

/**
 * The limit the run hit: the one its tree was ended for, or the file size cap (RLIMIT_FSIZE) when the
 * CLI itself died of SIGXFSZ writing past it (its Write tool runs in its own process).
 */
function limitFailure(options: CheckedRunTurnOptions, end: RunEnd, fields: ExitFields): LimitExceededError | undefined {
  const cap = options.limits?.scratchBytes;
  // The more precise cause first: the last look may also have found the scratch full of that file.
  if (end.sig === "SIGXFSZ" && cap !== undefined && (end.ending === undefined || isLimitKind(end.ending))) {
    const detail = `the CLI wrote a file past the limit of ${sizeText(cap)} (SIGXFSZ)`;
    return new LimitExceededError("limit_disk", detail, fields);
  }
  if (isLimitKind(end.ending)) return new LimitExceededError(end.ending, end.limitDetail ?? end.ending, fields);
  return undefined;
}

/** How the CLI process ended, as every error of the run carries it. */
type ExitFields = { exitCode: number | null; signal: NodeJS.Signals | null; stderr: string };

/** The launcher or the spawn failed: the CLI never ran. */
function startFailure(ctx: SuperviseContext, end: RunEnd, fields: ExitFields): Error | undefined {
  const launchError = launchFailure(ctx.launch, ctx.cgroup, fields, end.stdout.count);
  if (launchError instanceof ContainmentError) return launchError;
  const spawnError = end.spawnError ?? launchError;
  if (spawnError === undefined) return undefined;
  const code = (spawnError as NodeJS.ErrnoException).code;
  const notFound = code === "ENOENT" || code === "EACCES";
  return new ClaudeCodeCliError(`could not start the claude CLI (${code ?? "spawn error"})`, {
    ...fields,
    kind: notFound ? "cli_not_found" : "cli_error",
    retryable: false,
    cause: spawnError,
  });
}

function endingText(options: CheckedRunTurnOptions, ending: RunnerErrorKind): string {
  switch (ending) {
    case "timeout":
      return `did not finish within timeoutMs=${String(options.timeoutMs)}`;
    case "inactivity":
      return `printed nothing for inactivityTimeoutMs=${String(options.inactivityTimeoutMs)}`;
    case "aborted":
      return "was aborted by the caller's signal";
    case "killed":
      return "was killed by kill()";
    default:
      return ending;
  }
}

/** The CLI ended without a successful result: the result line's error, a lost session, or no result line. */
function resultFailure(options: CheckedRunTurnOptions, end: RunEnd, fields: ExitFields): ClaudeCodeCliError {
  const result = end.stdout.lastResult ?? {};
  const resultFields = {
    ...fields,
    subtype: stringField(result, "subtype"),
    errors: Array.isArray(result["errors"])
      ? (result["errors"] as unknown[]).map((e) => (typeof e === "string" ? e : JSON.stringify(e)))
      : [],
    terminalReason: stringField(result, "terminal_reason"),
    apiErrorStatus: typeof result["api_error_status"] === "number" ? result["api_error_status"] : undefined,
  };
  const kind = end.stdout.lastKind ?? "no_result";
  if (kind === "lost_session" && options.resume !== undefined)
    return new LostSessionError(options.resume, options.threadId, resultFields);
  const message =
    kind === "no_result"
      ? `the claude CLI ended (exit ${String(end.code)}${end.sig === null ? "" : `, ${end.sig}`}) without a result line`
      : `the claude CLI reported ${kind}` +
        (resultFields.apiErrorStatus === undefined ? "" : ` (API status ${resultFields.apiErrorStatus})`) +
        (resultFields.subtype === undefined ? "" : ` [${resultFields.subtype}]`);
  return new ClaudeCodeCliError(message, { ...resultFields, kind });
}

export { envAuth };
