// Conversations keyed by thread id. The first turn of a thread starts a session; later turns
// `--resume` the stored id. An id is stored only after a successful turn, so a failed first turn
// never leaves a thread pointing at a session the CLI did not keep. Resume is cwd-aware: the CLI only
// finds a session under its cwd's project folder, so a thread whose cwd changed starts fresh.
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
    const s = this.#map.get(threadId);
    return Promise.resolve(s === undefined ? undefined : { ...s });
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
  onLostSession?: "error" | "fresh";
}

export interface ThreadTurnHandle {
  readonly lines: AsyncIterable<ParsedLine>;
  readonly stderr: AsyncIterable<string>;
  readonly outcome: Promise<ThreadTurnOutcome>;
  /** The CLI process currently running (changes if a lost session is retried fresh). */
  readonly current: TurnHandle | undefined;
  kill(): void;
}

/** Runs one turn of a thread: resumes the thread's stored CLI session (fresh when none, or when the cwd changed) and stores the new one. */
export function runThreadTurn(options: ThreadTurnOptions): ThreadTurnHandle {
  const { store, threadId, onLostSession = "error", ...turnOptions } = options;
  const lines = new Channel<ParsedLine>();
  const stderr = new Channel<string>();
  let current: TurnHandle | undefined;
  let killed = false;
  const pipes: Promise<void>[] = [];

  const start = (resume: string | undefined, sessionFile: Uint8Array | undefined): TurnHandle => {
    const h = runTurn({
      ...turnOptions,
      threadId,
      ...(resume === undefined ? {} : { resume }),
      ...(resume !== undefined && sessionFile !== undefined && turnOptions.configHome !== undefined ? { sessionFile } : {}),
    });
    current = h;
    pipes.push(
      (async () => {
        for await (const l of h.lines) lines.push(l);
      })(),
      (async () => {
        for await (const l of h.stderr) stderr.push(l);
      })(),
    );
    if (killed) h.kill();
    return h;
  };

  const drive = async (): Promise<ThreadTurnOutcome> => {
    const stored = await store.get(threadId);
    let freshReason: FreshReason | undefined;
    let abandoned: string | undefined;
    let resume: string | undefined;
    if (stored === undefined) freshReason = "new_thread";
    else if (stored.cwd !== turnOptions.cwd) {
      freshReason = "cwd_changed";
      abandoned = stored.sessionId;
    } else resume = stored.sessionId;

    let outcome: TurnOutcome;
    try {
      outcome = await start(resume, stored?.sessionFile).outcome;
    } catch (err) {
      if (!(err instanceof LostSessionError) || onLostSession !== "fresh" || killed) throw err;
      freshReason = "lost_session";
      abandoned = resume;
      resume = undefined;
      outcome = await start(undefined, undefined).outcome;
    }
    if (outcome.sessionId !== undefined) {
      await store.set(threadId, {
        sessionId: outcome.sessionId,
        cwd: turnOptions.cwd,
        updatedAt: Date.now(),
        sessionFile: outcome.sessionFile,
      });
    }
    return { ...outcome, threadId, resumed: resume !== undefined, freshReason, abandonedSessionId: abandoned };
  };

  const outcome = drive();
  // End ours once every inner run's lines have been passed on.
  const endAll = (): void => {
    void Promise.allSettled(pipes).then(() => {
      lines.end();
      stderr.end();
    });
  };
  outcome.then(endAll, endAll);
  outcome.catch(() => {});
  return {
    lines,
    stderr,
    outcome,
    get current() {
      return current;
    },
    kill() {
      killed = true;
      current?.kill();
    },
  };
}
