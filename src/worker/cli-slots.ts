// A worker's concurrency counts CLIs, not jobs. A CLI prints its result line some 40 ms before it
// exits, and after it exits its job still appends the last lines, the snapshot and the turn's end,
// pops the session's order and completes in BullMQ: a dozen milliseconds of round trips under load.
// Waiting for all that before fetching the next job leaves the slot idle, so a job whose CLI has
// printed its result says so (`ending`) and BullMQ may hold one more job until that job returns:
// the next job is fetched, takes its lease and begins its attempt meanwhile, and starts its CLI the
// moment a slot is free (`acquire`, released when a CLI process exits).
//
// A job fetched this way waits at most for a CLI that has already printed its result; CLIs running
// never exceed `size`, whatever the jobs do, since every CLI start goes through `acquire`.
import type { Worker } from "bullmq";

/** The part of BullMQ's worker the slots steer: its concurrency, and a pause/resume to wake its loop. */
export type SlotWorker = Pick<Worker, "concurrency" | "isPaused" | "isRunning" | "pause" | "resume">;

/** What one job tells the worker about its CLIs. */
export interface CliSlot {
  /**
   * Waits for a free slot. Gives the slot's release (call it when that CLI has exited; idempotent),
   * or undefined when the job must not start a CLI (the worker is closing, or `signal` aborted).
   */
  acquire(signal?: AbortSignal): Promise<(() => void) | undefined>;
  /** The job's CLI has printed its result: the worker may fetch the next job. Idempotent. */
  ending(): void;
}

interface Waiter {
  grant(ok: boolean): void;
}

export class CliSlots {
  private running = 0;
  private extra = 0;
  private closed = false;
  private readonly waiters: Waiter[] = [];
  private readonly worker: SlotWorker;
  private readonly size: number;

  constructor(worker: SlotWorker, size: number) {
    this.worker = worker;
    this.size = size;
  }

  /** CLIs running now. */
  get busy(): number {
    return this.running;
  }

  /** One job's view, from its start until `done` (call exactly once, when the processor returns). */
  hold(): CliSlot & { done(): void } {
    const held = new Set<() => void>();
    let ended = false;
    return {
      acquire: async (signal) => {
        if (!(await this.take(signal))) return undefined;
        const release = (): void => {
          if (held.delete(release)) this.free();
        };
        held.add(release);
        return release;
      },
      ending: () => {
        if (ended) return;
        ended = true;
        this.setExtra(this.extra + 1);
        this.wake();
      },
      done: () => {
        for (const release of [...held]) release();
        if (ended) this.setExtra(this.extra - 1);
        ended = false;
      },
    };
  }

  /** Closed: the worker is shutting down. */
  get draining(): boolean {
    return this.closed;
  }

  /** From now on no job gets a slot: waiting ones are told to stand down (the worker is closing). */
  close(): void {
    this.closed = true;
    for (const waiter of this.waiters.splice(0)) waiter.grant(false);
  }

  private take(signal: AbortSignal | undefined): Promise<boolean> {
    if (this.closed || signal?.aborted === true) return Promise.resolve(false);
    if (this.running < this.size) {
      this.running++;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const onAbort = (): void => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        resolve(false);
      };
      const waiter: Waiter = {
        grant: (ok) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(ok);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private free(): void {
    const next = this.waiters.shift();
    if (next !== undefined)
      next.grant(true); // the slot passes on: `running` stays
    else this.running--;
  }

  private setExtra(extra: number): void {
    this.extra = extra;
    this.worker.concurrency = this.size + extra;
  }

  // BullMQ's loop re-reads its concurrency only when one of its jobs or fetches settles, so raising
  // it alone would fetch the next job only once this one completes. Resuming a worker is BullMQ's
  // public way to have its loop fetch again at once, without waiting for the active jobs; resume()
  // does nothing for a worker that is not paused, so a pause that does not wait for them goes first.
  // The loop cannot end meanwhile: the job that asks is still active. A worker paused by its owner
  // stays paused (it fetches nothing whatever its concurrency, and its own resume wakes the loop).
  private wake(): void {
    if (this.worker.isPaused() || !this.worker.isRunning()) return;
    const resume = (): Promise<void> => this.worker.resume();
    void this.worker.pause(true).then(resume, resume);
  }
}
