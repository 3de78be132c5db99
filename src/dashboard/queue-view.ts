// The queue as BullMQ holds it: counts, and the waiting, active, delayed and failed turns with
// their sessions (the newest few of each).
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

export async function queueView(queue: Queue | undefined): Promise<QueueView> {
  if (queue === undefined) return { available: false, counts: {}, jobs: [] };
  const counts = await queue.getJobCounts(...QUEUE_STATES, "completed");
  const jobs: QueueJob[] = [];
  for (const state of QUEUE_STATES) {
    for (const job of await queue.getJobs([state], 0, PER_STATE - 1)) {
      if (job === undefined || job === null) continue;
      const row = jobRow(job, state);
      jobs.push({
        state,
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
