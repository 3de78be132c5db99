// Sessions open in some page: each is folded once and followed with one tail of its log, whoever
// watches it; every page watching gets the same patches. A session nobody watches any more is kept
// a little while (a reload, a second operator) and then let go.
import { silentLogger, type Logger } from "../kernel/index.ts";
import type { SessionHistory } from "../archive/index.ts";
import { applyEvent, initialState, type ProjectionState } from "../projector/index.ts";
import { noteTrace, patchOf, sentCountsOf, type SentCounts, type SessionPatch, type TraceIds } from "./session-view.ts";

/** What a page is told: the state when it joins, then each event's patch. */
export interface Watcher {
  snapshot(state: ProjectionState, traces: TraceIds): void;
  patch(patch: SessionPatch): void;
  /** The session is no longer followed (its tail failed): the page should reconnect. */
  end(): void;
}

interface Watch {
  state: ProjectionState;
  traces: TraceIds;
  sent: SentCounts;
  watchers: Set<Watcher>;
  ready: Promise<void>;
  ac: AbortController;
  idle: NodeJS.Timeout | undefined;
}

/** How long a session nobody watches stays folded and followed. */
const KEEP_MS = 30_000;

export class WatchedSessions {
  readonly #log: SessionHistory;
  readonly #logger: Logger;
  readonly #watches = new Map<string, Watch>();

  constructor(log: SessionHistory, logger: Logger = silentLogger) {
    this.#log = log;
    this.#logger = logger;
  }

  /** Tells `w` the session's state, then every change, until `signal` aborts. */
  async watch(session: string, watcher: Watcher, signal: AbortSignal): Promise<void> {
    const watch = this.#watches.get(session) ?? this.#start(session);
    clearTimeout(watch.idle);
    watch.idle = undefined;
    await watch.ready;
    if (signal.aborted) return this.#leave(session, watch, watcher);
    // Snapshot and joining happen together: no patch can fall between them.
    watcher.snapshot(watch.state, watch.traces);
    watch.watchers.add(watcher);
    signal.addEventListener("abort", () => this.#leave(session, watch, watcher), { once: true });
  }

  close(): void {
    for (const watch of this.#watches.values()) {
      clearTimeout(watch.idle);
      watch.ac.abort();
    }
    this.#watches.clear();
  }

  #leave(session: string, watch: Watch, watcher: Watcher): void {
    watch.watchers.delete(watcher);
    if (watch.watchers.size > 0 || watch.idle !== undefined) return;
    watch.idle = setTimeout(() => {
      if (watch.watchers.size > 0) return;
      watch.ac.abort();
      this.#watches.delete(session);
    }, KEEP_MS);
    watch.idle.unref();
  }

  #start(session: string): Watch {
    const watch: Watch = {
      state: initialState(),
      traces: {},
      sent: new Map(),
      watchers: new Set(),
      ready: Promise.resolve(),
      ac: new AbortController(),
      idle: undefined,
    };
    this.#watches.set(session, watch);
    watch.ready = this.#fold(session, watch);
    watch.ready.then(
      () => void this.#follow(session, watch),
      () => this.#watches.delete(session),
    );
    return watch;
  }

  async #fold(session: string, watch: Watch): Promise<void> {
    for await (const page of this.#log.readPages(session, { pageSize: 2000 })) {
      for (const env of page) {
        applyEvent(watch.state, env);
        noteTrace(watch.traces, env);
      }
    }
    watch.sent = sentCountsOf(watch.state);
  }

  async #follow(session: string, watch: Watch): Promise<void> {
    try {
      for await (const env of this.#log.tail(session, {
        fromSeq: watch.state.lastSeq + 1,
        signal: watch.ac.signal,
        blockMs: 1000,
      })) {
        applyEvent(watch.state, env);
        noteTrace(watch.traces, env);
        const patch = patchOf(watch.state, env, watch.sent, watch.traces);
        for (const watcher of watch.watchers) watcher.patch(patch);
      }
      // An archived session's tail ends with its history: it has ended, nothing more will come. Its
      // pages stay as they are (ending them would make them reconnect and fold it again, forever).
      if (!watch.ac.signal.aborted && (await this.#log.home(session)) === "archive")
        await new Promise((resolve) => watch.ac.signal.addEventListener("abort", resolve, { once: true }));
    } catch (err) {
      this.#logger.warn(
        { err: (err as Error).message, session },
        "dashboard: following a session failed; its pages reconnect",
      );
    } finally {
      // Pages that still watch reconnect (EventSource does) and start a fresh fold.
      if (this.#watches.get(session) === watch) this.#watches.delete(session);
      clearTimeout(watch.idle);
      watch.ac.abort();
      for (const watcher of watch.watchers) watcher.end();
      watch.watchers.clear();
    }
  }
}
