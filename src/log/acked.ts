// What a writer outside any attempt (a producer, a decision hub, an operator's command) was last told
// each session's log holds, so its next append can claim it (AppendOptions.ackedSeq) and a log that
// lost those writes is refused (rolled_back) instead of appended to after a hole. Bounded: the
// sessions used longest ago are forgotten first, and a forgotten session's next append claims nothing.
import { LRUCache } from "lru-cache";
import { LogRolledBackError } from "./errors.ts";
import type { AppendResult } from "./event-log.ts";

const DEFAULT_SESSIONS_KEPT = 10_000;

export class AckedSeqs {
  readonly #seqs: LRUCache<string, number>;

  constructor(maxSessions = DEFAULT_SESSIONS_KEPT) {
    this.#seqs = new LRUCache({ max: maxSessions });
  }

  /** The highest seq of `session` this writer was told is in the log, if it remembers one. */
  get(session: string): number | undefined {
    return this.#seqs.peek(session);
  }

  /** Claims nothing for `session` from now on (after a rolled-back log was reported). */
  forget(session: string): void {
    this.#seqs.delete(session);
  }

  /**
   * Takes an append's result: remembers the seq it was acknowledged, or, when the log was found
   * rolled back, forgets the session (the next append claims nothing, after this one failed loudly)
   * and throws LogRolledBackError. Other outcomes are returned for the caller to judge.
   */
  settle(session: string, result: AppendResult): AppendResult {
    const acked = this.#seqs.peek(session);
    if (result.outcome === "rolled_back") {
      this.#seqs.delete(session);
      throw new LogRolledBackError(session, acked ?? 0, result.lastSeq);
    }
    const seq =
      result.outcome === "appended" || result.outcome === "duplicate" ? Math.max(result.lastSeq, acked ?? 0) : acked;
    if (seq !== undefined) this.#seqs.set(session, seq);
    return result;
  }
}
