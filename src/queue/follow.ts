// Waits of one producer on one session share a single tail of that session's log: ten turns of a
// session awaited at once cost one blocking connection and one decode per event, not ten of each.
// A wait that starts behind the shared tail (its turn was queued earlier) first reads what it
// missed, holding back live events meanwhile, so every wait still sees its turn's events in order.
import { isTerminalKind } from "../events/index.ts";
import { type Envelope, type EventLog } from "../log/index.ts";

/** Gets every event of `turn` from `fromSeq` on, in order; returns true to stop. */
export type TurnListener = (event: Envelope) => boolean;

interface Sub {
  readonly turn: string;
  readonly fromSeq: number;
  readonly listener: TurnListener;
  /** False: the listener needs only the turn's `cli.line` events and its end. */
  readonly every: boolean;
  readonly end: (err?: unknown) => void;
  /** False while it catches up on events the shared tail had passed; live events wait in `held`. */
  live: boolean;
  held: Envelope[];
}

class SharedTail {
  readonly subs = new Set<Sub>();
  /** The seq after the last event the tail handed out. */
  next: number;
  readonly #ac = new AbortController();
  readonly #onEmpty: () => void;

  constructor(log: EventLog, session: string, fromSeq: number, blockMs: number, onEmpty: () => void) {
    this.next = fromSeq;
    this.#onEmpty = onEmpty;
    void this.#run(log, session, blockMs);
  }

  async #run(log: EventLog, session: string, blockMs: number): Promise<void> {
    try {
      // Kinds nobody listens to are passed over undecoded (session snapshots above all). A listener
      // that joins later and needs them catches up from the log itself (see #catchUp).
      const want = (kind: string): boolean => kind === "cli.line" || isTerminalKind(kind) || this.#wantsEvery();
      for await (const ev of log.tail(session, { fromSeq: this.next, signal: this.#ac.signal, blockMs, want })) {
        this.next = ev.seq + 1;
        for (const sub of this.subs) {
          if (!sub.live) sub.held.push(ev);
          else this.offer(sub, ev);
        }
      }
    } catch (err) {
      for (const sub of [...this.subs]) this.remove(sub, err);
    }
  }

  #wantsEvery(): boolean {
    for (const sub of this.subs) if (sub.every) return true;
    return false;
  }

  /** Hands `ev` to `sub` if it is one of its events; ends `sub` when its listener says so (or throws). */
  offer(sub: Sub, ev: Envelope): void {
    if (ev.seq < sub.fromSeq || ev.turn !== sub.turn || !this.subs.has(sub)) return;
    let stop: boolean;
    try {
      stop = sub.listener(ev);
    } catch (err) {
      return this.remove(sub, err);
    }
    if (stop) this.remove(sub);
  }

  remove(sub: Sub, err?: unknown): void {
    if (!this.subs.delete(sub)) return;
    sub.end(err);
    if (this.subs.size === 0) this.close();
  }

  close(): void {
    this.#onEmpty();
    this.#ac.abort();
  }
}

export class SessionFollowers {
  readonly #log: EventLog;
  readonly #blockMs: number;
  readonly #tails = new Map<string, SharedTail>();

  constructor(log: EventLog, options: { blockMs?: number } = {}) {
    this.#log = log;
    this.#blockMs = options.blockMs ?? 1000;
  }

  /**
   * Follows `turn` of `session` from `fromSeq` until the listener returns true, `signal` aborts, or
   * the log fails. With `every` false the listener gets only the turn's `cli.line` and terminal events.
   */
  follow(
    session: string,
    turn: string,
    fromSeq: number,
    listener: TurnListener,
    signal?: AbortSignal,
    every = true,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      let tail = this.#tails.get(session);
      const fresh = tail === undefined;
      if (tail === undefined) {
        const created: SharedTail = new SharedTail(this.#log, session, fromSeq, this.#blockMs, () => {
          if (this.#tails.get(session) === created) this.#tails.delete(session);
        });
        this.#tails.set(session, (tail = created));
      }
      const shared = tail;
      const onAbort = (): void => shared.remove(sub, signal!.reason);
      const sub: Sub = {
        turn,
        fromSeq,
        listener,
        every,
        live: fresh || fromSeq >= shared.next,
        held: [],
        end: (err) => {
          signal?.removeEventListener("abort", onAbort);
          if (err === undefined) resolve();
          else reject(err);
        },
      };
      shared.subs.add(sub);
      signal?.addEventListener("abort", onAbort, { once: true });
      if (!sub.live) void this.#catchUp(session, shared, sub, shared.next - 1);
    });
  }

  async #catchUp(session: string, shared: SharedTail, sub: Sub, toSeq: number): Promise<void> {
    try {
      for await (const page of this.#log.readPages(session, { fromSeq: sub.fromSeq, toSeq })) {
        for (const ev of page) shared.offer(sub, ev);
        if (!shared.subs.has(sub)) return;
      }
    } catch (err) {
      return shared.remove(sub, err);
    }
    // No await from here on: nothing can slip between the held events and going live.
    for (const ev of sub.held) shared.offer(sub, ev);
    sub.held = [];
    sub.live = true;
  }

  /** Ends every shared tail (their waits reject with `reason`). */
  close(reason: Error = new Error("the producer was closed")): void {
    for (const tail of [...this.#tails.values()]) for (const sub of [...tail.subs]) tail.remove(sub, reason);
  }
}
