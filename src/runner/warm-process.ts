// A CLI process that stays up between turns of one session: `claude -p --input-format stream-json`,
// one user message per stdin line, each turn ending at its `result` line. It starts exactly as a cold
// run with the same options would (startCli: argv, env, config home, containment, tree marker), so a
// turn answered warm is the turn a cold `--resume` would have answered. A turn that is aborted or
// times out ends the whole tree: a process interrupted mid-turn may hold half a turn in its memory
// (and a message written mid-turn is folded into the running turn), so it is never reused.
import { createHmac, randomBytes } from "node:crypto";
import { readFileSync, realpathSync, statSync } from "node:fs";
import type { ChildProcess } from "node:child_process";
import { stableJson } from "../kernel/index.ts";
import type { ParsedLine } from "../protocol/index.ts";
import { residentBytes } from "./limits.ts";
import { badOptions, ClaudeCodeCliError, type RunnerErrorKind } from "./errors.ts";
import {
  validateRunTurnOptions,
  validateTurnDeadlines,
  type CheckedRunTurnOptions,
  type RunTurnOptions,
} from "./options.ts";
import { resolveClaudeBin } from "./resolve-bin.ts";
import {
  captureSession,
  settleOutcome,
  startCli,
  StderrLines,
  StdoutLines,
  watchTree,
  type RunEnd,
  type RunTurnExtras,
  type SuperviseContext,
  type TurnOutcome,
  type WatchedTree,
} from "./run-turn.ts";

/** runTurn's options that a warm process takes with each turn rather than at its start. */
const PER_TURN = ["prompt", "signal", "timeoutMs", "inactivityTimeoutMs"] as const;

/** How a warm process starts: runTurn's options without the per-turn ones (prompt, signal, deadlines). */
export type WarmProcessOptions = Omit<RunTurnOptions, (typeof PER_TURN)[number]> & RunTurnExtras;

/** A run's options without the per-turn ones: how a warm process answering that run starts. */
export function warmStartOptions(options: RunTurnOptions & RunTurnExtras): WarmProcessOptions {
  const { prompt: _p, signal: _s, timeoutMs: _t, inactivityTimeoutMs: _i, ...start } = options;
  return start;
}

/** Per-turn controls of a warm turn. */
export interface WarmTurnOptions {
  /** Aborting it ends the whole process tree; the turn rejects with kind `aborted`. */
  signal?: AbortSignal | undefined;
  /** Ends the whole process tree if the turn has not printed its result by then (kind `timeout`). */
  timeoutMs?: number | undefined;
  /** Ends the whole process tree when the CLI prints nothing for this long (kind `inactivity`). */
  inactivityTimeoutMs?: number | undefined;
  /** Each stdout line of this turn, parsed, as the CLI prints it. */
  onLine?: ((line: ParsedLine) => void) | undefined;
}

/** Why a warm process is gone: the ending turnstream caused, or `exited` when the CLI ended by itself. */
export interface WarmDeath {
  reason: RunnerErrorKind | "exited";
  exitCode: number | null;
  signal: NodeJS.Signals | null;
}

/** A CLI process kept up between the turns of one session. */
export interface WarmProcess {
  /** The CLI's pid (or its launcher's, with pid-namespace containment). */
  readonly pid: number | undefined;
  /** Value of TURNSTREAM_TREE in the tree's environment. */
  readonly treeMarker: string;
  /** What must match for reuse (see warmFingerprint). */
  readonly fingerprint: string;
  /** The CLI session id it last reported (the resumed one before its first turn). */
  readonly sessionId: string | undefined;
  /** When it was started or last finished a turn (epoch ms). */
  readonly lastUsedAt: number;
  /** False once the CLI exited or close() was called. */
  readonly alive: boolean;
  /** True while a turn runs. */
  readonly busy: boolean;
  /** Why it is gone, once it is. */
  readonly dead: WarmDeath | undefined;
  /** Writes one user message; resolves at that turn's successful result, rejects as runTurn's outcome would. */
  turn(prompt: string, options?: WarmTurnOptions): Promise<TurnOutcome>;
  /** Resident memory of the whole tree, from /proc (0 once it is gone). */
  rssBytes(): number;
  /** Ends the tree (TERM, then KILL after killGraceMs); resolves once it is gone and its files removed. Idempotent. */
  close(): Promise<void>;
  /** Resolves once the process is gone (whoever ended it) and its files removed. */
  readonly ended: Promise<void>;
}

/** Starts the CLI in stream-json input mode, as a cold run with the same options would start. */
export function startWarmProcess(options: WarmProcessOptions): WarmProcess {
  const { sessionFile, ...rest } = options;
  for (const key of PER_TURN) if (key in rest) throw badOptions(key, "is given per turn to a warm process");
  const checked = validateRunTurnOptions(rest);
  const fingerprint = fingerprintOf(checked);
  const ctx = startCli(checked, sessionFile, "stream-json");
  return new WarmCli(ctx, fingerprint);
}

const FINGERPRINT_KEY = randomBytes(32);

/**
 * What must match for a warm process to take a turn in place of a cold run: cwd, every option that
 * shapes argv, the env overlay, the CLI binary (path, size, mtime: its version), the config home and
 * skills, and the contents of the settings and MCP files. Keyed with a random per-process secret, so
 * the digest says nothing about the env values it covers; it compares only within this process.
 */
export function warmFingerprint(options: WarmProcessOptions): string {
  const { sessionFile: _sessionFile, ...rest } = options;
  return fingerprintOf(validateRunTurnOptions(rest));
}

function fingerprintOf(options: CheckedRunTurnOptions): string {
  // How the process started (resume, fork) and how it is watched do not change the turns it answers.
  const {
    resume: _r,
    forkSession: _f,
    logger: _l,
    onStderr: _o,
    threadId: _t,
    killGraceMs: _k,
    watchdog: _w,
    ...shaping
  } = options;
  const bin = resolveClaudeBin({ claudeBin: options.claudeBin });
  // A run id only names the home's folder; which home it is comes from the rest.
  const configHome = options.configHome === undefined ? undefined : { ...options.configHome, runId: undefined };
  const material = {
    ...shaping,
    configHome,
    bin: fileIdentity(bin),
    settings: fileContent(options.settingsFile),
    mcp: fileContent(options.mcpConfigFile),
  };
  return createHmac("sha256", FINGERPRINT_KEY).update(stableJson(material)).digest("hex");
}

function fileIdentity(path: string): string {
  try {
    const real = realpathSync(path);
    const st = statSync(real);
    return `${real}|${st.size}|${st.mtimeMs}`;
  } catch {
    return path;
  }
}

function fileContent(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** The turn in flight: how to settle it (its deadlines are armed on the tree's ending). */
interface PendingTurn {
  resolve: (outcome: TurnOutcome) => void;
  reject: (error: Error) => void;
  started: number;
  options: WarmTurnOptions;
}

class WarmCli implements WarmProcess {
  readonly pid: number | undefined;
  readonly treeMarker: string;
  readonly fingerprint: string;
  lastUsedAt = Date.now();
  dead: WarmDeath | undefined;
  readonly #ctx: SuperviseContext;
  readonly #child: ChildProcess;
  /** The tree, its ending (where each turn's deadlines are armed), watchdog and exit hook. */
  readonly #tree: WatchedTree;
  readonly #stdout: StdoutLines;
  readonly #stderr: StderrLines;
  readonly #closed: Promise<void>;
  #spawnError: Error | undefined;
  #sessionId: string | undefined;
  #turn: PendingTurn | undefined;
  #closing = false;

  constructor(ctx: SuperviseContext & { child: ChildProcess }, fingerprint: string) {
    const { child } = ctx;
    this.#ctx = ctx;
    this.#child = child;
    this.pid = child.pid;
    this.treeMarker = ctx.marker;
    this.fingerprint = fingerprint;
    this.#sessionId = ctx.o.resume;
    this.#tree = watchTree(child, ctx);
    this.#stdout = new StdoutLines((p) => this.#line(p));
    this.#stderr = new StderrLines(ctx.o.onStderr, ctx.logger, false);
    this.#closed = this.#watch();
  }

  get sessionId(): string | undefined {
    return this.#stdout.sessionId ?? this.#sessionId;
  }

  get alive(): boolean {
    return this.dead === undefined && !this.#closing;
  }

  get busy(): boolean {
    return this.#turn !== undefined;
  }

  /** Wires stdio and exit; resolves once the process is gone, its tree reaped and its files removed. */
  #watch(): Promise<void> {
    const child = this.#child;
    child.stdout!.on("data", (chunk: Buffer) => {
      this.#tree.ending.activity();
      this.#stdout.push(chunk);
    });
    child.stderr!.on("data", (chunk: Buffer) => this.#stderr.push(chunk));
    child.stdin!.on("error", () => {
      // Writing to a CLI that just exited: its exit settles the turn.
    });
    child.on("error", (err) => {
      this.#spawnError = err;
    });
    child.on("exit", (code, signal) => {
      this.dead ??= { reason: this.#tree.ending.reason ?? "exited", exitCode: code, signal };
      setImmediate(() => void this.#tree.ending.reap());
    });
    return new Promise<void>((resolve) => {
      child.on("close", (code: number | null, sig: NodeJS.Signals | null) => {
        this.dead ??= { reason: this.#tree.ending.reason ?? "exited", exitCode: code, signal: sig };
        void this.#tree.ending.reap().then(() => {
          this.#tree.watchdog?.stop();
          this.#tree.untrack?.();
          this.#stderr.flush();
          this.#stdout.flush();
          this.#ctx.cleanup();
          this.#failTurn(code, sig);
          resolve();
        });
      });
    });
  }

  turn(prompt: string, options: WarmTurnOptions = {}): Promise<TurnOutcome> {
    if (typeof prompt !== "string") return Promise.reject(badOptions("prompt", "must be a string"));
    try {
      validateTurnDeadlines({ timeoutMs: options.timeoutMs, inactivityTimeoutMs: options.inactivityTimeoutMs });
    } catch (err) {
      return Promise.reject(err as Error);
    }
    // A second message while a turn runs would be folded into that turn, not answered on its own.
    if (this.#turn !== undefined)
      return Promise.reject(
        new ClaudeCodeCliError("a turn is already running in this warm claude process", {
          kind: "bad_options",
          retryable: false,
        }),
      );
    if (!this.alive) {
      const why = this.dead?.reason ?? "closed";
      return Promise.reject(
        new ClaudeCodeCliError(`the warm claude process is gone (${why})`, { kind: "no_result", retryable: true }),
      );
    }
    this.#stdout.beginTurn();
    return new Promise<TurnOutcome>((resolve, reject) => {
      this.#turn = { resolve, reject, started: Date.now(), options };
      this.#tree.ending.arm(options);
      this.#child.stdin!.write(JSON.stringify({ type: "user", message: { role: "user", content: prompt } }) + "\n");
    });
  }

  /** Ends the turn in flight (if any) and stops its deadlines. */
  #takeTurn(): PendingTurn | undefined {
    const turn = this.#turn;
    if (turn === undefined) return undefined;
    this.#turn = undefined;
    this.#tree.ending.disarm();
    this.lastUsedAt = Date.now();
    return turn;
  }

  #line(parsed: ParsedLine): void {
    const turn = this.#turn;
    if (turn === undefined) {
      this.#ctx.logger.debug({ type: parsed.type }, "warm claude printed a line between turns");
      return;
    }
    try {
      turn.options.onLine?.(parsed);
    } catch (err) {
      this.#ctx.logger.warn({ err: (err as Error).message }, "onLine callback threw");
    }
    if ((parsed.category === "known" || parsed.category === "unknown") && parsed.line["type"] === "result")
      this.#settleTurn();
  }

  /** The turn's result line is in: the same outcome (or error) a cold run with this result would give. */
  #settleTurn(): void {
    const turn = this.#takeTurn()!;
    const stdout = this.#stdout;
    const sessionFile = captureSession(this.#ctx, stdout.sessionId);
    // A limit hit since the last look fails the turn (and ends the process) as it would a cold run.
    const hit = this.#tree.ending.limitHitNow();
    const end: RunEnd = {
      code: null,
      sig: null,
      spawnError: undefined,
      ending: hit?.kind,
      limitDetail: hit?.detail,
      stdout,
      stderrTail: this.#stderr.tail,
      started: turn.started,
      pid: this.pid!,
      sessionFile,
    };
    try {
      turn.resolve(settleOutcome(this.#ctx, end));
    } catch (err) {
      turn.reject(err as Error);
    }
  }

  /** The process is gone with a turn in flight: why, as a cold run would say it. */
  #failTurn(code: number | null, sig: NodeJS.Signals | null): void {
    const turn = this.#takeTurn();
    if (turn === undefined) return;
    const ctx = {
      ...this.#ctx,
      o: { ...this.#ctx.o, timeoutMs: turn.options.timeoutMs, inactivityTimeoutMs: turn.options.inactivityTimeoutMs },
    };
    const stdout = this.#stdout;
    const end: RunEnd = {
      code,
      sig,
      spawnError: this.#spawnError,
      ending: this.#tree.ending.reason,
      limitDetail: this.#tree.ending.limitDetail,
      stdout,
      stderrTail: this.#stderr.tail,
      started: turn.started,
      pid: this.pid ?? 0,
      sessionFile: undefined,
    };
    try {
      settleOutcome(ctx, end);
      turn.reject(
        new ClaudeCodeCliError("the warm claude process ended before the turn's result", {
          kind: "no_result",
          exitCode: code,
          signal: sig,
        }),
      );
    } catch (err) {
      turn.reject(err as Error);
    }
  }

  rssBytes(): number {
    if (this.dead !== undefined) return 0;
    let total = 0;
    for (const pid of this.#tree.scope.members()) total += residentBytes(pid);
    return total;
  }

  get ended(): Promise<void> {
    return this.#closed;
  }

  close(): Promise<void> {
    if (!this.#closing) {
      this.#closing = true;
      // Once the CLI has exited its tree is being reaped already; ending it again would only arm a stray KILL timer.
      if (this.dead === undefined) this.#tree.ending.end("killed");
    }
    return this.#closed;
  }
}
