// One worker's idle warm processes, at most one per session. A process is taken out for a turn and
// put back after it; whatever leaves the pool any other way (idle too long, least recently used over
// the count or memory cap, a fingerprint that no longer matches, closeAll) has its tree ended, so the
// pool never holds a process nobody can reach. The pool knows nothing of sessions' logs: its owner
// ends a process whose session moved on elsewhere (`end`).
import { silentLogger, type Logger } from "../kernel/index.ts";
import type { WarmProcess } from "./warm-process.ts";

/** Why `take` found no process to reuse. */
export type WarmMiss = "none" | "fingerprint_changed" | "dead" | "expired" | "evicted" | "moved";

/** A live matching process, or why there is none (the caller then runs the turn cold). */
export type WarmTake = { process: WarmProcess; reason?: undefined } | { process: undefined; reason: WarmMiss };

/** Limits of a warm pool. */
export interface WarmPoolOptions {
  /** An idle process is ended after this long in the pool. */
  idleTtlMs: number;
  /** Most idle processes kept; the least recently used goes first. */
  maxProcesses: number;
  /** Most resident memory of all idle trees together (from /proc), checked on every put. */
  maxRssBytes?: number | undefined;
  logger?: Logger | undefined;
}

interface Entry {
  process: WarmProcess;
  timer: NodeJS.Timeout;
}

/** Remembered reasons of sessions whose process left the pool, so `take` can say why; bounded. */
const MAX_GONE = 1024;

/** A per-worker pool of idle warm CLI processes, keyed by session. Independent of Redis. */
export class WarmPool {
  /** Insertion order is recency: the first entry is the least recently used. */
  readonly #idle = new Map<string, Entry>();
  readonly #gone = new Map<string, WarmMiss>();
  readonly #o: WarmPoolOptions;
  readonly #logger: Logger;

  constructor(options: WarmPoolOptions) {
    if (!(options.idleTtlMs > 0) || !(Number.isInteger(options.maxProcesses) && options.maxProcesses >= 0)) {
      throw new TypeError("WarmPool needs idleTtlMs > 0 and an integer maxProcesses >= 0");
    }
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
  }

  /** Idle processes held now. */
  get size(): number {
    return this.#idle.size;
  }

  /** Takes the session's idle process out of the pool if it is alive and its fingerprint matches. */
  take(session: string, fingerprint: string): WarmTake {
    const entry = this.#idle.get(session);
    if (entry === undefined) {
      const reason = this.#gone.get(session) ?? "none";
      this.#gone.delete(session);
      return { process: undefined, reason };
    }
    this.#remove(session);
    const warmProcess = entry.process;
    if (!warmProcess.alive) {
      void warmProcess.close();
      return { process: undefined, reason: "dead" };
    }
    if (Date.now() - warmProcess.lastUsedAt >= this.#o.idleTtlMs) {
      void warmProcess.close();
      return { process: undefined, reason: "expired" };
    }
    if (warmProcess.fingerprint !== fingerprint) {
      void warmProcess.close();
      return { process: undefined, reason: "fingerprint_changed" };
    }
    return { process: warmProcess };
  }

  /** Puts a process back after a turn (ends it instead if it is busy or dead), then applies the caps. */
  put(session: string, process: WarmProcess): void {
    const old = this.#idle.get(session);
    if (old !== undefined) {
      this.#remove(session);
      if (old.process !== process) void old.process.close();
    }
    this.#gone.delete(session);
    if (!process.alive || process.busy) {
      void process.close();
      return;
    }
    const timer = setTimeout(() => this.#evict(session, "expired"), this.#o.idleTtlMs);
    timer.unref();
    this.#idle.set(session, { process, timer });
    this.#applyCaps();
  }

  /** The idle processes now, by session. */
  idle(): Array<[session: string, process: WarmProcess]> {
    return [...this.#idle].map(([s, e]) => [s, e.process]);
  }

  /** Ends the session's idle process if it is still `process` (not taken out since), remembering `why` for `take`. */
  end(session: string, process: WarmProcess, why: WarmMiss): Promise<void> {
    return this.#idle.get(session)?.process === process ? this.#evict(session, why) : Promise.resolve();
  }

  /** Ends every idle process; resolves once their trees are gone. */
  async closeAll(): Promise<void> {
    const all = [...this.#idle.keys()].map((s) => this.#evict(s, "evicted"));
    await Promise.all(all);
  }

  #applyCaps(): void {
    while (this.#idle.size > this.#o.maxProcesses) void this.#evict(this.#idle.keys().next().value!, "evicted");
    const cap = this.#o.maxRssBytes;
    if (cap === undefined) return;
    const rss = new Map([...this.#idle].map(([s, e]) => [s, e.process.rssBytes()]));
    let total = [...rss.values()].reduce((a, b) => a + b, 0);
    for (const [session, bytes] of rss) {
      if (total <= cap) break;
      this.#logger.info(
        { session: session, rssBytes: bytes, totalBytes: total },
        "warm pool over its memory cap; ending the least recently used",
      );
      void this.#evict(session, "evicted");
      total -= bytes;
    }
  }

  #evict(session: string, why: WarmMiss): Promise<void> {
    const entry = this.#idle.get(session);
    if (entry === undefined) return Promise.resolve();
    this.#remove(session);
    this.#gone.set(session, entry.process.alive ? why : "dead");
    if (this.#gone.size > MAX_GONE) this.#gone.delete(this.#gone.keys().next().value!);
    return entry.process.close();
  }

  #remove(session: string): void {
    const entry = this.#idle.get(session);
    if (entry === undefined) return;
    clearTimeout(entry.timer);
    this.#idle.delete(session);
  }
}
