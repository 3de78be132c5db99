// Warm sessions: the worker keeps a session's CLI process after a finished turn and writes the
// session's next turn to its stdin. The turn still goes through the attempt's steps (lease, fencing
// epoch, attempt.started, cli.line, session.snapshot, turn.finished); only where its CLI process
// comes from differs. A kept process answers only when the session's latest snapshot is the one it
// produced: a turn that ran anywhere else since (another worker, a fenced or failed attempt) moved
// the session on, and the process is closed. Idle processes are also checked against their sessions'
// fencing epochs every third of a lease, so one that another worker's attempt overtook ends within
// that time even if its owner never sees the session again: one session never keeps two processes.
import {
  Channel,
  startWarmProcess,
  WarmPool,
  warmFingerprint,
  warmStartOptions,
  type RunTurnOptions,
  type TurnHandle,
  type TurnOutcome,
  type WarmProcess,
} from "../runner/index.ts";
import type { AttemptStartedData } from "../events/index.ts";
import type { Logger } from "../kernel/index.ts";
import type { SnapshotRef } from "../log/index.ts";
import type { ParsedLine } from "../protocol/index.ts";
import type { TurnJob } from "../queue/index.ts";
import type { WarmSettings } from "./options.ts";

/** What attempt.started says of a warm-mode turn: `warm`, or why a new process answers it. */
export type WarmLabel = NonNullable<AttemptStartedData["warm"]>;

/** The part of a CLI run the run step reads: a cold run's handle, or a warm turn's. */
export type CliHandle = Pick<TurnHandle, "lines" | "stderr" | "outcome" | "exited" | "pid" | "kill">;

/** One attempt's warm decision, made before attempt.started. */
export interface WarmUse {
  label: WarmLabel;
  /** The session's kept process (label `warm`), else undefined: a new one is started for the turn. */
  process: WarmProcess | undefined;
  /** False for turns that run cold whatever the mode (supervised, skills): the plain cold path. */
  viaProcess: boolean;
  /** Set once the process was kept for the next turn. */
  kept?: boolean;
}

/** How the kept processes learn that their sessions moved on elsewhere. */
export interface WarmWatch {
  /** The session's fencing epoch now (it grows with every attempt, on any worker). */
  epochOf(session: string): Promise<number>;
  /** True while this worker runs a turn of the session (its own attempt raised the epoch). */
  runningHere(session: string): boolean;
  /** How often idle processes are checked. */
  everyMs: number;
}

/** Why a warm-mode turn runs cold all the same (supervised, skills), if it does. */
function coldOnly(job: TurnJob): "supervised" | "skills" | undefined {
  return job.options.supervised === true ? "supervised" : (job.options.skills?.length ?? 0) > 0 ? "skills" : undefined;
}

/** The worker's kept processes and how a turn gets one. */
export class WarmSessions {
  readonly #pool: WarmPool;
  readonly #settings: WarmSettings;
  /** The snapshot each kept process produced last: it may answer only while that is the session's latest. */
  readonly #made = new WeakMap<WarmProcess, { epoch: number; at: string }>();
  /** Where a process's stderr goes: the current turn's channel (stderr belongs to the process, not a turn). */
  readonly #stderr = new WeakMap<WarmProcess, { ch: Channel<string> | undefined }>();

  readonly #watch: WarmWatch;
  readonly #logger: Logger;
  /** Checks idle processes while any are kept. */
  #timer: NodeJS.Timeout | undefined;

  constructor(settings: WarmSettings, watch: WarmWatch, logger: Logger) {
    this.#settings = settings;
    this.#watch = watch;
    this.#logger = logger;
    this.#pool = new WarmPool({
      idleTtlMs: settings.idleTtlMs,
      maxProcesses: settings.maxProcesses,
      maxRssBytes: settings.maxRssBytes,
      logger,
    });
  }

  /** Whether the turn runs in warm mode (the worker's default or the turn's own option). */
  wants(job: TurnJob): boolean {
    return this.#settings.all || job.options.warm === true;
  }

  /** Idle processes kept now. */
  get kept(): number {
    return this.#pool.size;
  }

  get handoffMs(): number {
    return this.#settings.handoffMs;
  }

  /** Whether the turn's CLI process is a kept one (or one started to be kept): warm mode, not a cold-only turn. */
  viaProcess(job: TurnJob): boolean {
    return this.wants(job) && coldOnly(job) === undefined;
  }

  /**
   * Decides how the turn's CLI process comes about; `latest` is the session's snapshot pointer read when the attempt
   * began.
   */
  choose(job: TurnJob, options: RunTurnOptions, latest: SnapshotRef | null | undefined): WarmUse {
    const cold = coldOnly(job);
    if (cold !== undefined) {
      // Their per-run state (the decision hook's token, the skills written into the workspace) lives
      // for one run, so these turns take the plain cold path.
      this.drop(job.session);
      return { label: cold, process: undefined, viaProcess: false };
    }
    let fingerprint: string;
    try {
      fingerprint = warmFingerprint(warmStartOptions(options));
    } catch {
      // Options the runner refuses: the cold start reports why.
      fingerprint = "";
    }
    const taken = this.#pool.take(job.session, fingerprint);
    if (taken.process === undefined) return { label: taken.reason, process: undefined, viaProcess: true };
    const made = this.#made.get(taken.process);
    if (latest == null || made?.epoch !== latest.epoch || made.at !== latest.at) {
      void taken.process.close();
      return { label: "moved", process: undefined, viaProcess: true };
    }
    return { label: "warm", process: taken.process, viaProcess: true };
  }

  /** Starts the turn's CLI: the kept process, or a new one started as a cold run with these options would be. */
  run(use: WarmUse, options: RunTurnOptions & { sessionFile?: Uint8Array | undefined }): CliHandle {
    let process = use.process;
    if (process === undefined) {
      const sink: { ch: Channel<string> | undefined } = { ch: undefined };
      // The process's stderr goes to whichever turn it is answering, not to this run's handler.
      process = startWarmProcess({ ...warmStartOptions(options), onStderr: (line) => sink.ch?.push(line) });
      this.#stderr.set(process, sink);
    }
    use.process = process;
    const { prompt, signal, timeoutMs, inactivityTimeoutMs } = options;
    return this.#turn(process, prompt ?? "", { signal, timeoutMs, inactivityTimeoutMs });
  }

  #turn(
    warmProcess: WarmProcess,
    prompt: string,
    options: Pick<RunTurnOptions, "signal" | "timeoutMs" | "inactivityTimeoutMs">,
  ): CliHandle {
    const lines = new Channel<ParsedLine>();
    const stderr = new Channel<string>();
    const sink = this.#stderr.get(warmProcess);
    if (sink !== undefined) sink.ch = stderr;
    const outcome: Promise<TurnOutcome> = warmProcess.turn(prompt, { ...options, onLine: (l) => lines.push(l) });
    const ended = (): void => {
      if (sink?.ch === stderr) sink.ch = undefined;
      lines.end();
      stderr.end();
    };
    outcome.then(ended, ended);
    return {
      lines,
      stderr,
      outcome,
      // The process stays up: its CPU is free for the next run once the turn's result is in.
      exited: outcome.then(
        () => undefined,
        () => undefined,
      ),
      pid: warmProcess.pid,
      kill: () => void warmProcess.close(),
    };
  }

  /** Keeps the turn's process for the session's next turn; `epoch` and `at` name the snapshot its turn appended. */
  keep(session: string, use: WarmUse, epoch: number, at: string): void {
    const warmProcess = use.process;
    if (warmProcess === undefined || !warmProcess.alive) return;
    use.kept = true;
    this.#made.set(warmProcess, { epoch, at });
    this.#pool.put(session, warmProcess);
    this.#timer ??= setInterval(() => void this.endMoved(), this.#watch.everyMs).unref();
  }

  /**
   * Ends the idle processes whose sessions began an attempt since their turn on another worker (a
   * higher epoch while this worker runs none of the session's turns). Epochs only grow, so a process
   * taken and put back while its session's epoch was being read is never ended by mistake.
   */
  async endMoved(): Promise<void> {
    const idle = this.#pool.idle();
    if (idle.length === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    await Promise.all(
      idle.map(async ([session, warmProcess]) => {
        const epoch = await this.#watch.epochOf(session).catch(() => undefined);
        const made = this.#made.get(warmProcess)?.epoch;
        if (epoch === undefined || made === undefined || epoch <= made || this.#watch.runningHere(session)) return;
        this.#logger.info(
          { session, epoch, madeAt: made },
          "another attempt of the session began elsewhere; ending its kept CLI process",
        );
        await this.#pool.end(session, warmProcess, "moved");
      }),
    );
  }

  /** Ends the turn's process unless it was kept: a turn that did not finish cleanly leaves nothing behind to reuse. */
  release(use: WarmUse | undefined): void {
    if (use?.process !== undefined && use.kept !== true) void use.process.close();
  }

  /** Closes the session's kept process, if any: a cold run is starting, never beside it. */
  drop(session: string): void {
    // No fingerprint matches "", so take closes what it finds.
    this.#pool.take(session, "");
  }

  /** Ends every kept process (worker shutdown). */
  closeAll(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    return this.#pool.closeAll();
  }
}
