// Replay: fold a session's log from zero in memory, never touching the live read models. Optionally
// only up to an event or a moment, optionally on into live events, optionally with the original
// timing scaled. Observers see every event and the state after it (renderers, and later exporters).
import { TurnstreamError } from "../kernel/index.ts";
import type { Envelope, HistoryReader } from "../log/index.ts";
import { applyEvent } from "./reduce.ts";
import { initialState, type ProjectionState } from "./state.ts";

export type Until = { seq: number } | { time: number; iso: string };

/** Parses `--until`: a seq number (`42`) or an ISO-8601 time. Throws a message naming the fix. */
export function parseUntil(text: string): Until {
  if (/^\d+$/.test(text)) {
    const seq = Number(text);
    if (!Number.isSafeInteger(seq) || seq < 1) throw new Error("--until SEQ must be a positive event number");
    return { seq };
  }
  const time = Date.parse(text);
  if (!/^\d{4}-\d\d-\d\d/.test(text) || Number.isNaN(time)) {
    throw new Error(
      `--until must be an event number or an ISO time like 2025-01-31T12:00:00Z (got ${JSON.stringify(text.slice(0, 40))})`,
    );
  }
  return { time, iso: text };
}

export interface ReplayObserver {
  /** After each event is applied. */
  onEvent?(env: Envelope, state: ProjectionState): void | Promise<void>;
  /** After the log's events so far (or up to --until) are applied, before following. */
  onCaughtUp?(state: ProjectionState): void | Promise<void>;
  onEnd?(state: ProjectionState): void | Promise<void>;
}

export interface ReplayOptions {
  /** Stop at this seq or time (parseUntil reads `--until`); default the whole log. */
  until?: Until | undefined;
  /** Continue with live events after the history (until `signal` aborts). */
  follow?: boolean | undefined;
  /** Replay history with its original timing divided by this factor; none = as fast as possible. */
  speed?: number | undefined;
  /** Aborting it ends the replay (and a follow). */
  signal?: AbortSignal | undefined;
  /** Told each event as it is folded, with the state after it. */
  observers?: readonly ReplayObserver[];
}

/** How a replay waits between events when `speed` is set: resolves after `ms`, or at once when `signal` aborts. */
export type ReplaySleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export class UnknownSessionError extends TurnstreamError {
  readonly session: string;
  constructor(session: string, prefix: string) {
    super(
      `session ${session} has no events under key prefix "${prefix}"; check the id (turnstream sessions lists them) or --prefix`,
      { code: "unknown_session" },
    );
    this.session = session;
  }
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

function beyond(until: Until | undefined, env: Envelope): boolean {
  if (until === undefined) return false;
  if ("seq" in until) return env.seq > until.seq;
  const atMs = Date.parse(env.at);
  return !Number.isNaN(atMs) && atMs > until.time;
}

/**
 * Rebuilds a session's read models from its log alone, optionally up to a point or following live; touches no stored
 * read model.
 */
export function replaySession(
  log: HistoryReader,
  session: string,
  options: ReplayOptions = {},
): Promise<ProjectionState> {
  return replayWithSleep(log, session, options, defaultSleep);
}

/**
 * replaySession with its waits between events made through `sleep`, so tests can see the timing
 * without waiting it out. Not part of the package's entries.
 */
export async function replayWithSleep(
  log: HistoryReader,
  session: string,
  options: ReplayOptions,
  sleep: ReplaySleep,
): Promise<ProjectionState> {
  const st = await log.stat(session);
  if (!st.exists && st.length === 0) throw new UnknownSessionError(session, log.prefix);
  const state = initialState();
  const observers = options.observers ?? [];
  const speed = options.speed;
  if (speed !== undefined && !(speed > 0))
    throw new Error("--speed must be a number above 0, e.g. 2 for twice as fast");
  let prevAt: number | undefined;
  const toSeq = options.until !== undefined && "seq" in options.until ? options.until.seq : undefined;
  let stoppedEarly = false;

  const handle = async (env: Envelope): Promise<void> => {
    if (speed !== undefined) {
      const at = Date.parse(env.at);
      if (prevAt !== undefined && !Number.isNaN(at) && at > prevAt) await sleep((at - prevAt) / speed, options.signal);
      if (!Number.isNaN(at)) prevAt = at;
    }
    applyEvent(state, env);
    for (const observer of observers) await observer.onEvent?.(env, state);
  };

  for await (const env of log.read(session, { toSeq })) {
    if (options.signal?.aborted) break;
    if (beyond(options.until, env)) {
      stoppedEarly = true;
      break;
    }
    await handle(env);
  }
  for (const observer of observers) await observer.onCaughtUp?.(state);
  if (options.follow && !stoppedEarly && !options.signal?.aborted) {
    // Live events have no timing to reproduce: they arrive in real time.
    for await (const env of log.tail(session, { fromSeq: state.lastSeq + 1, signal: options.signal })) {
      if (beyond(options.until, env)) break;
      applyEvent(state, env);
      for (const observer of observers) await observer.onEvent?.(env, state);
    }
  }
  for (const observer of observers) await observer.onEnd?.(state);
  return state;
}
