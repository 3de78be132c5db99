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
import { badOptions, ClaudeCodeCliError, LostSessionError, type RunnerErrorKind } from "./errors.ts";
import { silentLogger, stringField } from "../kernel/index.ts";
import { validateRunTurnOptions, type CheckedRunTurnOptions, type RunTurnOptions } from "./options.ts";
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
import { pidMark, ProcessTree, TREE_MARKER_VAR, trackTree, type PidMark } from "./process-tree.ts";
import { resolveClaudeBin } from "./resolve-bin.ts";
import { captureSessionFile, restoreSessionFile } from "./session-file.ts";
import { injectSkills, placeSkills, prepareSkillAddDir, type ListedSkill } from "./skills.ts";
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
function sandboxClaim(o: CheckedRunTurnOptions): "1" | undefined {
  const bypass = o.skipPermissions === true ? "skipPermissions" : o.permissionMode === "bypassPermissions" ? "permissionMode" : undefined;
  if (bypass === undefined || process.getuid?.() !== 0) return undefined;
  if (o.sandboxed !== true) {
    throw badOptions(
      bypass,
      "as root the CLI only skips permissions with IS_SANDBOX=1; set `sandboxed: true` if this runs in a sandbox, or drop " +
        (bypass === "skipPermissions" ? "skipPermissions" : 'permissionMode "bypassPermissions"'),
    );
  }
  return "1";
}

/**
 * Where the caller's skills go. claude-md: into the cwd, listed in its CLAUDE.md. add-dir: where the
 * CLI's own discovery finds them, which for an untrusted workspace (no project setting sources) is only
 * the run's own config home; without one they sit in an added directory and are listed for the model.
 */
function offerSkills(
  o: CheckedRunTurnOptions,
  home: ConfigHome | undefined,
  scratchDir: () => string,
): { addDirs: string[]; listed: ListedSkill[] } {
  if (o.skills === undefined || o.skills.length === 0) return { addDirs: [], listed: [] };
  if ((o.skillsMode ?? "claude-md") === "claude-md") {
    injectSkills(o.cwd, o.skills);
    return { addDirs: [], listed: [] };
  }
  if (o.trustWorkspace !== true && home !== undefined) {
    placeSkills(o.skills, join(home.dir, "skills"));
    return { addDirs: [], listed: [] };
  }
  const d = prepareSkillAddDir(o.skills, scratchDir());
  return { addDirs: [d.dir], listed: o.trustWorkspace === true ? [] : d.skills };
}

/** The appended system prompt: the caller's, then what an untrusted workspace still offers as text. */
function systemPromptAppendix(o: CheckedRunTurnOptions, skills: readonly ListedSkill[]): string | undefined {
  const context = o.trustWorkspace === true ? undefined : workspaceContext(o.cwd, skills);
  const parts = [o.appendSystemPrompt, context].filter((p): p is string => p !== undefined);
  return parts.length === 0 ? undefined : parts.join("\n\n");
}

function auth(
  o: CheckedRunTurnOptions,
  env: Record<string, string>,
): { home: ConfigHome | undefined; source: AuthSource | "inherited" } {
  if (o.configHome === undefined) return { home: undefined, source: "inherited" };
  const home = createConfigHome({ ...o.configHome, runEnv: env, logger: o.logger ?? silentLogger });
  return { home, source: home.auth };
}

/** Spawns the real `claude -p` for one turn: its stdout lines as they come, and the outcome (or a typed error) once it ends. */
export function runTurn(options: RunTurnOptions & RunTurnExtras): TurnHandle {
  const { sessionFile, ...rest } = options;
  const o = validateRunTurnOptions(rest);
  if (sessionFile !== undefined && !(sessionFile instanceof Uint8Array)) throw badOptions("sessionFile", "must be bytes");
  if (sessionFile !== undefined && (o.resume === undefined || o.configHome === undefined)) {
    throw badOptions("sessionFile", "needs `resume` and `configHome` (it is restored into the per-run home)");
  }
  const logger = o.logger ?? silentLogger;
  const killGraceMs = o.killGraceMs ?? 2000;

  const overlay: Record<string, string | undefined> = { ...o.env, IS_SANDBOX: sandboxClaim(o) };
  const marker = randomUUID();
  overlay[TREE_MARKER_VAR] = marker;
  const env = buildEnv({ overlay, isolate: o.isolate });
  const bin = resolveClaudeBin({ claudeBin: o.claudeBin, env });

  // Everything from here on creates files: undo it if spawning fails.
  const cleanups: Array<() => void> = [];
  const cleanup = (): void => {
    for (const c of cleanups.splice(0).reverse()) {
      try {
        c();
      } catch (err) {
        logger.warn({ err: (err as Error).message }, "run cleanup failed");
      }
    }
  };
  let child: ChildProcess;
  let mark: PidMark | undefined;
  let cgroup: RunCgroup | undefined;
  let launch: LaunchCommand;
  let contained: ContainmentKind;
  let home: ConfigHome | undefined;
  let authSource: AuthSource | "inherited";
  try {
    ({ home, source: authSource } = auth(o, env));
    if (home !== undefined) {
      cleanups.push(() => home!.teardown());
      Object.assign(env, home.env);
      if (sessionFile !== undefined) restoreSessionFile(home.dir, o.cwd, o.resume!, sessionFile);
    }
    let scratch: string | undefined;
    const scratchDir = (): string => {
      if (scratch === undefined) {
        scratch = mkdtempSync(join(env["TMPDIR"] ?? tmpdir(), "turnstream-run-"));
        const s = scratch;
        cleanups.push(() => rmSync(s, { recursive: true, force: true }));
      }
      return scratch;
    };
    const skills = offerSkills(o, home, scratchDir);
    const args = buildArgs({ ...o, appendSystemPrompt: undefined }, skills.addDirs);
    const appendix = systemPromptAppendix(o, skills.listed);
    if (appendix !== undefined) {
      // A file, not argv: argv is readable by every user through /proc.
      const f = join(scratchDir(), "append-system-prompt.txt");
      writeFileSync(f, appendix, { mode: 0o600 });
      args.push("--append-system-prompt-file", f);
    }
    // The run's cgroup exists before the CLI does, and the CLI enters it before it can fork anything.
    const c = containment(logger);
    contained = c.kind;
    if (c.hostDir !== undefined) cgroup = RunCgroup.create(c, marker);
    launch = launchCommand(c, cgroup, bin, args);
    logger.debug({ bin, cwd: o.cwd, flags: args.filter((a) => a.startsWith("-")), containment: c.kind }, "spawning claude");
    mark = pidMark();
    child = spawn(launch.file, launch.args, { cwd: o.cwd, env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
  } catch (err) {
    cgroup?.remove();
    cleanup();
    throw err;
  }
  return supervise(child, { o, logger, killGraceMs, marker, mark, contained, cgroup, launch, home, authSource, cleanup });
}

interface SuperviseContext {
  o: CheckedRunTurnOptions;
  logger: typeof silentLogger;
  killGraceMs: number;
  marker: string;
  /** The kernel's pid allocation just before the spawn. */
  mark: PidMark | undefined;
  contained: ContainmentKind;
  /** The run's cgroup, which the CLI entered before it exec'd. */
  cgroup: RunCgroup | undefined;
  /** What was spawned: the CLI, or a launcher (sh, unshare) that execs it. */
  launch: LaunchCommand;
  home: ConfigHome | undefined;
  authSource: AuthSource | "inherited";
  cleanup: () => void;
}

function supervise(child: ChildProcess, ctx: SuperviseContext): TurnHandle {
  const { o, logger, killGraceMs } = ctx;
  const started = Date.now();
  const lines = new Channel<ParsedLine>();
  const stderrLines = new Channel<string>();
  const splitter = createLineSplitter();
  const classifier = new RunClassifier();
  let stderrTail = "";
  let lineCount = 0;
  let sessionId: string | undefined = undefined;
  let lastResult: Record<string, unknown> | undefined;
  let lastKind: ErrorKind | undefined;
  let ending: RunnerErrorKind | undefined;
  let spawnError: Error | undefined;
  let untrack: (() => void) | undefined;
  let watchdog: WatchdogHandle | undefined;
  const timers: NodeJS.Timeout[] = [];
  let inactivity: NodeJS.Timeout | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  let killDeadline = 0;

  // The run's processes: its cgroup (everything the CLI started, wherever it went) and the /proc walk.
  const scope = new RunScope(child.pid === undefined ? undefined : new ProcessTree(child.pid, ctx.marker, ctx.mark), ctx.cgroup);
  if (child.pid !== undefined) {
    untrack = trackTree(scope);
    if (o.watchdog !== false) {
      watchdog = startWatchdog({ cliPid: child.pid, marker: ctx.marker, killGraceMs, cgroup: ctx.cgroup?.path });
    }
  }

  const terminate = (kind: RunnerErrorKind): void => {
    if (ending !== undefined || scope.tree === undefined) return;
    ending = kind;
    logger.info({ pid: child.pid, reason: kind }, "ending claude process tree");
    scope.signal("SIGTERM");
    killDeadline = Date.now() + killGraceMs;
    killTimer = setTimeout(() => {
      scope.signal("SIGKILL");
    }, killGraceMs);
  };

  const onAbort = (): void => terminate("aborted");
  if (o.signal !== undefined) {
    if (o.signal.aborted) queueMicrotask(onAbort);
    else o.signal.addEventListener("abort", onAbort, { once: true });
  }
  if (o.timeoutMs !== undefined) timers.push(setTimeout(() => terminate("timeout"), o.timeoutMs));
  const armInactivity = (): void => {
    if (o.inactivityTimeoutMs === undefined || ending !== undefined) return;
    if (inactivity === undefined) inactivity = setTimeout(() => terminate("inactivity"), o.inactivityTimeoutMs);
    else inactivity.refresh();
  };
  armInactivity();

  const onLine = (p: ParsedLine): void => {
    lineCount++;
    if (p.category === "known" || p.category === "unknown") {
      const line = p.line;
      if (line["type"] === "system" && line["subtype"] === "init") sessionId = stringField(line, "session_id") ?? sessionId;
      if (line["type"] === "result") {
        lastResult = line;
        sessionId = stringField(line, "session_id") ?? sessionId;
      }
    }
    const k = classifier.add(p);
    if (k !== undefined) lastKind = k;
    lines.push(p);
  };

  child.stdout!.on("data", (chunk: Buffer) => {
    armInactivity();
    for (const item of splitter.push(chunk)) onLine(parseItem(item));
  });
  const errDecoder = new StringDecoder("utf8");
  let errPending = "";
  const emitStderr = (line: string): void => {
    stderrTail = (stderrTail + line + "\n").slice(-STDERR_KEEP);
    stderrLines.push(line);
    try {
      o.onStderr?.(line);
    } catch (err) {
      logger.warn({ err: (err as Error).message }, "onStderr callback threw");
    }
  };
  child.stderr!.on("data", (chunk: Buffer) => {
    const parts = (errPending + errDecoder.write(chunk)).split("\n");
    errPending = parts.pop()!;
    for (const l of parts) emitStderr(l.endsWith("\r") ? l.slice(0, -1) : l);
  });
  child.stdin!.on("error", () => {
    // The CLI may exit before reading stdin; its exit status says what happened.
  });
  child.stdin!.end(o.prompt ?? "");
  child.on("error", (err) => {
    spawnError = err;
  });

  // After the CLI exits, end whatever it left running (background Bash children) before settling:
  // TERM (if not sent already), then check every 100 ms and KILL what is left at the deadline. Then
  // the run's cgroup is removed.
  let reaped: Promise<void> | undefined;
  const reap = (): Promise<void> => {
    if (reaped !== undefined) return reaped;
    reaped = new Promise<void>((resolve) => {
      if (killTimer !== undefined) clearTimeout(killTimer);
      const done = (): void => void scope.release(logger).then(resolve);
      if (scope.members().length === 0) return done();
      if (ending === undefined) {
        scope.signal("SIGTERM");
        killDeadline = Date.now() + killGraceMs;
      }
      const check = (): void => {
        if (scope.members().length === 0) return done();
        if (Date.now() >= killDeadline) {
          scope.signal("SIGKILL");
          return done();
        }
        // Referenced on purpose: the host must not exit before the SIGKILL went out.
        setTimeout(check, Math.min(100, Math.max(0, killDeadline - Date.now())));
      };
      check();
    });
    return reaped;
  };
  let onExited!: () => void;
  const exited = new Promise<void>((r) => (onExited = r));
  child.on("exit", () => {
    onExited();
    // A tick later, so whoever waits on `exited` (the next run, for its slot) goes before the scan.
    setImmediate(() => void reap());
  });

  const outcome = new Promise<TurnOutcome>((resolve, reject) => {
    child.on("close", (code: number | null, sig: NodeJS.Signals | null) => {
      void reap().then(() => {
        for (const t of timers) clearTimeout(t);
        if (inactivity !== undefined) clearTimeout(inactivity);
        o.signal?.removeEventListener("abort", onAbort);
        watchdog?.stop();
        untrack?.();
        const tail = errDecoder.end() + errPending;
        if (tail !== "") emitStderr(tail);
        for (const item of splitter.end()) onLine(parseItem(item));
        let captured: Buffer | undefined;
        if (ctx.home !== undefined && sessionId !== undefined) {
          try {
            captured = captureSessionFile(ctx.home.dir, o.cwd, sessionId);
          } catch (err) {
            logger.warn({ err: (err as Error).message }, "could not capture the session file");
          }
        }
        ctx.cleanup();
        lines.end();
        stderrLines.end();
        const fields = { exitCode: code, signal: sig, stderr: stderrTail };
        const launchError = launchFailure(ctx.launch, ctx.cgroup, fields, lineCount);
        if (launchError instanceof ContainmentError) return reject(launchError);
        spawnError ??= launchError;
        if (spawnError !== undefined) {
          const notFound = (spawnError as NodeJS.ErrnoException).code === "ENOENT" || (spawnError as NodeJS.ErrnoException).code === "EACCES";
          return reject(
            new ClaudeCodeCliError(`could not start the claude CLI (${(spawnError as NodeJS.ErrnoException).code ?? "spawn error"})`, {
              ...fields,
              kind: notFound ? "cli_not_found" : "cli_error",
              retryable: false,
              cause: spawnError,
            }),
          );
        }
        if (lastKind === "ok" && lastResult !== undefined) {
          return resolve({
            sessionId,
            result: lastResult,
            resultText: stringField(lastResult, "result"),
            exitCode: code,
            signal: sig,
            durationMs: Date.now() - started,
            lineCount,
            pid: child.pid!,
            auth: ctx.authSource,
            sessionFile: captured,
          });
        }
        if (ending !== undefined) {
          const what = { timeout: `did not finish within timeoutMs=${String(o.timeoutMs)}`, inactivity: `printed nothing for inactivityTimeoutMs=${String(o.inactivityTimeoutMs)}`, aborted: "was aborted by the caller's signal", killed: "was killed by kill()" }[ending as "timeout"] ?? ending;
          return reject(new ClaudeCodeCliError(`the claude CLI ${what}; its process tree was ended`, { ...fields, kind: ending }));
        }
        const r = lastResult ?? {};
        const resultFields = {
          ...fields,
          subtype: stringField(r, "subtype"),
          errors: Array.isArray(r["errors"]) ? (r["errors"] as unknown[]).map((e) => (typeof e === "string" ? e : JSON.stringify(e))) : [],
          terminalReason: stringField(r, "terminal_reason"),
          apiErrorStatus: typeof r["api_error_status"] === "number" ? r["api_error_status"] : undefined,
        };
        const kind = lastKind ?? "no_result";
        if (kind === "lost_session" && o.resume !== undefined) return reject(new LostSessionError(o.resume, o.threadId, resultFields));
        const message =
          kind === "no_result"
            ? `the claude CLI ended (exit ${String(code)}${sig === null ? "" : `, ${sig}`}) without a result line`
            : `the claude CLI reported ${kind}` +
              (resultFields.apiErrorStatus === undefined ? "" : ` (API status ${resultFields.apiErrorStatus})`) +
              (resultFields.subtype === undefined ? "" : ` [${resultFields.subtype}]`);
        reject(new ClaudeCodeCliError(message, { ...resultFields, kind }));
      });
    });
  });
  outcome.catch(() => {});
  void outcome.then(onExited, onExited);

  return {
    lines,
    stderr: stderrLines,
    outcome,
    exited,
    pid: child.pid,
    configHome: ctx.home,
    treeMarker: ctx.marker,
    watchdogPid: watchdog?.pid,
    containment: ctx.contained,
    cgroup: ctx.cgroup?.path,
    kill: () => terminate("killed"),
  };
}

export { envAuth };
