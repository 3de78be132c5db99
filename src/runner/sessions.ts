// Conversations keyed by thread id. The first turn of a thread starts a session; later turns
// `--resume` the stored id. An id is stored only after a successful turn, so a failed first turn
// never leaves a thread pointing at a session the CLI did not keep. Resume is cwd-aware: the CLI only
// finds a session under its cwd's project folder, so a thread whose cwd changed starts fresh.
import { resolve } from "node:path";
import type { ParsedLine } from "../protocol/index.ts";
import { Channel } from "./channel.ts";
import { LostSessionError } from "./errors.ts";
import type { RunTurnOptions } from "./options.ts";
import { runTurn, type TurnHandle, type TurnOutcome } from "./run-turn.ts";

export interface StoredSession {
  sessionId: string;
  cwd: string;
  updatedAt: number;
  /** The CLI's session file, kept when runs use per-run config homes (restored before resuming). */
  sessionFile?: Uint8Array | undefined;
}

export interface SessionStore {
  get(threadId: string): Promise<StoredSession | undefined>;
  set(threadId: string, session: StoredSession): Promise<void>;
  delete(threadId: string): Promise<void>;
}

export class InMemorySessionStore implements SessionStore {
  readonly #map = new Map<string, StoredSession>();
  get(threadId: string): Promise<StoredSession | undefined> {
    const stored = this.#map.get(threadId);
    return Promise.resolve(stored === undefined ? undefined : { ...stored });
  }
  set(threadId: string, session: StoredSession): Promise<void> {
    this.#map.set(threadId, { ...session });
    return Promise.resolve();
  }
  delete(threadId: string): Promise<void> {
    this.#map.delete(threadId);
    return Promise.resolve();
  }
}

/** Why a turn did not resume: first turn of the thread, its cwd changed, or the CLI lost the session. */
export type FreshReason = "new_thread" | "cwd_changed" | "lost_session";

export interface ThreadTurnOutcome extends TurnOutcome {
  threadId: string;
  /** True when this turn continued the stored session. */
  resumed: boolean;
  freshReason: FreshReason | undefined;
  /** The stored session this turn did not continue (cwd changed / lost). */
  abandonedSessionId: string | undefined;
}

export interface ThreadTurnOptions extends Omit<RunTurnOptions, "resume" | "threadId"> {
  /** Where each thread's CLI session id and cwd are kept between turns. */
  store: SessionStore;
  /** The conversation this turn belongs to (the store's key). */
  threadId: string;
  /** What to do when the CLI no longer has the stored session. Default "error" (LostSessionError). */
  onLostSession?: "error" | "fresh" | undefined;
}

export interface ThreadTurnHandle {
  readonly lines: AsyncIterable<ParsedLine>;
  readonly stderr: AsyncIterable<string>;
  readonly outcome: Promise<ThreadTurnOutcome>;
  /** The CLI process currently running (changes if a lost session is retried fresh). */
  readonly current: TurnHandle | undefined;
  kill(): void;
}

/** Which stored session a turn continues, and why it starts fresh when it does not. */
interface ResumePlan {
  resume: string | undefined;
  sessionFile: Uint8Array | undefined;
  freshReason: FreshReason | undefined;
  abandoned: string | undefined;
}

/**
 * Whether a CLI session held under cwd `held` may be resumed by a run in `cwd`: the same directory,
 * compared as paths (a trailing slash or a `.` part does not make another one). The queued path
 * (src/worker/resume.ts) decides with this too.
 */
export function sameCwd(held: string, cwd: string): boolean {
  return held === cwd || resolve(held) === resolve(cwd);
}

/** Resume is cwd-aware: the CLI only finds a session under its cwd's project folder. */
function planResume(stored: StoredSession | undefined, cwd: string): ResumePlan {
  if (stored === undefined)
    return { resume: undefined, sessionFile: undefined, freshReason: "new_thread", abandoned: undefined };
  if (!sameCwd(stored.cwd, cwd))
    return { resume: undefined, sessionFile: undefined, freshReason: "cwd_changed", abandoned: stored.sessionId };
  return { resume: stored.sessionId, sessionFile: stored.sessionFile, freshReason: undefined, abandoned: undefined };
}

/**
 * The CLI runs of one thread turn (two when a lost session is retried fresh), their lines and stderr
 * passed on through one pair of channels that end once the last run's are drained.
 */
class ThreadRuns {
  readonly lines = new Channel<ParsedLine>();
  readonly stderr = new Channel<string>();
  current: TurnHandle | undefined;
  killed = false;
  readonly #options: Omit<ThreadTurnOptions, "store" | "onLostSession">;
  readonly #pipes: Promise<void>[] = [];

  constructor(options: Omit<ThreadTurnOptions, "store" | "onLostSession">) {
    this.#options = options;
  }

  start(plan: Pick<ResumePlan, "resume" | "sessionFile">): TurnHandle {
    // A session file is only restored into a per-run home, for a resume.
    const restore = plan.resume !== undefined && this.#options.configHome !== undefined;
    const handle = runTurn({
      ...this.#options,
      resume: plan.resume,
      sessionFile: restore ? plan.sessionFile : undefined,
    });
    this.current = handle;
    this.#pipes.push(pipe(handle.lines, this.lines), pipe(handle.stderr, this.stderr));
    if (this.killed) handle.kill();
    return handle;
  }

  kill(): void {
    this.killed = true;
    this.current?.kill();
  }

  /** Ends ours once every run's lines have been passed on. */
  endWhenDrained(): void {
    void Promise.allSettled(this.#pipes).then(() => {
      this.lines.end();
      this.stderr.end();
    });
  }
}

async function pipe<T>(from: AsyncIterable<T>, to: Channel<T>): Promise<void> {
  for await (const item of from) to.push(item);
}

/**
 * Runs one turn of a thread: resumes the thread's stored CLI session (fresh when none, or when the cwd changed) and
 * stores the new one.
 */
export function runThreadTurn(options: ThreadTurnOptions): ThreadTurnHandle {
  const { store, onLostSession = "error", ...turnOptions } = options;
  const runs = new ThreadRuns(turnOptions);
  const outcome = driveThreadTurn(runs, store, options.threadId, onLostSession, turnOptions.cwd);
  const endAll = (): void => runs.endWhenDrained();
  outcome.then(endAll, endAll);
  outcome.catch(() => {});
  return {
    lines: runs.lines,
    stderr: runs.stderr,
    outcome,
    get current() {
      return runs.current;
    },
    kill() {
      runs.kill();
    },
  };
}

/**
 * Runs the turn as planned (once more, fresh, when the CLI lost the session and that is wanted) and stores the session
 * it ended in.
 */
async function driveThreadTurn(
  runs: ThreadRuns,
  store: SessionStore,
  threadId: string,
  onLostSession: "error" | "fresh",
  cwd: string,
): Promise<ThreadTurnOutcome> {
  let plan = planResume(await store.get(threadId), cwd);
  let outcome: TurnOutcome;
  try {
    outcome = await runs.start(plan).outcome;
  } catch (err) {
    if (!(err instanceof LostSessionError) || onLostSession !== "fresh" || runs.killed) throw err;
    plan = { resume: undefined, sessionFile: undefined, freshReason: "lost_session", abandoned: plan.resume };
    outcome = await runs.start(plan).outcome;
  }
  if (outcome.sessionId !== undefined) {
    await store.set(threadId, {
      sessionId: outcome.sessionId,
      cwd,
      updatedAt: Date.now(),
      sessionFile: outcome.sessionFile,
    });
  }
  return {
    ...outcome,
    threadId,
    resumed: plan.resume !== undefined,
    freshReason: plan.freshReason,
    abandonedSessionId: plan.abandoned,
  };
}
