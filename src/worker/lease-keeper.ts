// Keeps a running turn's session lease: renews it every third of its TTL, and stops the turn when the
// lease is lost, when the turn was cancelled (the renew reads the cancel flag in the same step), or
// when Redis stayed unreachable for longer than the TTL (past that, someone else may hold it).
import type { SessionOrder } from "../queue/index.ts";
import type { StopReason } from "./types.ts";

export interface LeaseKeeperOptions {
  order: SessionOrder;
  session: string;
  turn: string;
  token: string;
  leaseMs: number;
  stop(reason: StopReason): void;
  /** Renewed with the lease (a tenant's running slot); its failure lets it lapse, the turn goes on. */
  alsoRenew?: (() => Promise<unknown>) | undefined;
}

/** How often a lease is renewed: every third of its TTL, so two renewals may fail before it lapses. */
export function renewEveryMs(leaseMs: number): number {
  return Math.max(200, Math.floor(leaseMs / 3));
}

export class LeaseKeeper {
  readonly #o: LeaseKeeperOptions;
  readonly #timer: NodeJS.Timeout;
  #lastRenew = Date.now();
  #renewing = false;
  #stopped = false;

  constructor(options: LeaseKeeperOptions) {
    this.#o = options;
    this.#timer = setInterval(() => this.#renew(), renewEveryMs(options.leaseMs));
  }

  #renew(): void {
    // One renew at a time: a slow Redis must not pile them up.
    if (this.#renewing) return;
    this.#renewing = true;
    const { order, session, turn, token, leaseMs, stop } = this.#o;
    order
      .renew(session, turn, token, leaseMs)
      .then((renewed) => {
        // A renewal still in flight when the job let go of the lease itself says nothing.
        if (this.#stopped) return;
        if (renewed === "lost") return stop("lease_lost");
        this.#lastRenew = Date.now();
        if (renewed === "cancelled") stop("cancelled");
        this.#o.alsoRenew?.().catch(() => undefined);
      })
      .catch(() => {
        if (!this.#stopped && Date.now() - this.#lastRenew > leaseMs) stop("lease_lost");
      })
      .finally(() => {
        this.#renewing = false;
      });
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
  }
}
