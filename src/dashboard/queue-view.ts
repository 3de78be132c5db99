// The queue as BullMQ holds it: counts, and the waiting, active, delayed and failed turns with
// their sessions (the newest few of each). A parked turn's job is shown in state `parked`: BullMQ
// holds it delayed until its request's deadline, but it waits for a person, not for its time.
import type { Queue } from "bullmq";
import { jobRow, QUEUE_STATES } from "../queue/index.ts";

export interface QueueJob {
  state: string;
  turn: string;
  session: string;
  attempt: number;
  at: string | null;
  failedReason: string | null;
}

export interface QueueView {
  available: boolean;
  counts: Record<string, number>;
  jobs: QueueJob[];
}

const PER_STATE = 50;

/** `parked`: the turns parked now (their jobs are shown in state `parked`). */
export async function queueView(queue: Queue | undefined, parked: ReadonlySet<string> = new Set()): Promise<QueueView> {
  if (queue === undefined) return { available: false, counts: {}, jobs: [] };
  const counts = await queue.getJobCounts(...QUEUE_STATES, "completed");
  const jobs: QueueJob[] = [];
  for (const state of QUEUE_STATES) {
    for (const job of await queue.getJobs([state], 0, PER_STATE - 1)) {
      if (job === undefined || job === null) continue;
      const row = jobRow(job, state);
      jobs.push({
        state: parked.has(row.turn) ? "parked" : state,
        turn: row.turn,
        session: row.session,
        attempt: row.attempt,
        at: row.startedAt ?? row.queuedAt ?? null,
        failedReason: job.failedReason ? String(job.failedReason) : null,
      });
    }
  }
  return { available: true, counts: counts as Record<string, number>, jobs };
}
