// The tokens in a warm session's CLI environment. A kept process keeps the env it started with, so a
// token in it (the model gateway's, the CLI telemetry receiver's) lives as long as that process, not
// its attempt: one bookkeeping for each kind of token says which session holds which and revokes it
// when its process ends.
import type { WarmUse } from "./warm.ts";

export interface Revocable {
  readonly revoked: boolean;
  revoke(): void;
}

export class WarmTokens<Grant extends Revocable> {
  /** Warm sessions' tokens, by session. */
  readonly #sessions = new Map<string, Grant>();
  /** Kept processes whose end already revokes their token. */
  readonly #watched = new WeakSet<object>();

  /** The session's token, while it is live (its kept process may answer the next turn). */
  kept(session: string): Grant | undefined {
    const grant = this.#sessions.get(session);
    return grant !== undefined && !grant.revoked ? grant : undefined;
  }

  /** `grant` is the session's from now on; `replaced`, the token of the process it replaces, ends. */
  hold(session: string, grant: Grant, replaced?: Grant): void {
    if (replaced !== undefined) this.end(session, replaced);
    this.#sessions.set(session, grant);
  }

  /**
   * Ends an attempt's token, unless it is a warm session's whose process was kept for the next turn:
   * that one ends with the process. True when it was kept.
   */
  close(grant: Grant, session: string | undefined, warm: WarmUse | undefined): boolean {
    const process = warm?.process;
    if (session === undefined || warm?.kept !== true || process === undefined || !process.alive) {
      if (session === undefined) grant.revoke();
      else this.end(session, grant);
      return false;
    }
    if (!this.#watched.has(process)) {
      this.#watched.add(process);
      void process.ended.then(() => this.end(session, grant));
    }
    return true;
  }

  end(session: string, grant: Grant): void {
    grant.revoke();
    if (this.#sessions.get(session) === grant) this.#sessions.delete(session);
  }
}
