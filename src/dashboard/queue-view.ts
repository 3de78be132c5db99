// The queue as BullMQ holds it: counts, and the waiting, active, delayed and failed turns with
// their sessions (the newest few of each).
import type { Queue } from "bullmq";

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

const STATES = ["waiting", "active", "delayed", "prioritized", "failed"] as const;
const PER_STATE = 50;

export async function queueView(queue: Queue | undefined): Promise<QueueView> {
  if (queue === undefined) return { available: false, counts: {}, jobs: [] };
  const counts = await queue.getJobCounts(...STATES, "completed");
  const jobs: QueueJob[] = [];
  for (const state of STATES) {
    for (const job of await queue.getJobs([state], 0, PER_STATE - 1)) {
      if (job === undefined || job === null) continue;
      const data = (job.data ?? {}) as { session?: unknown; turn?: unknown };
      const at = job.processedOn ?? job.timestamp;
      jobs.push({
        state,
        turn: String(data.turn ?? job.id ?? "?"),
        session: String(data.session ?? "?"),
        attempt: job.attemptsMade + (state === "active" ? 1 : 0),
        at: at ? new Date(at).toISOString() : null,
        failedReason: job.failedReason ? String(job.failedReason) : null,
      });
    }
  }
  return { available: true, counts: counts as Record<string, number>, jobs };
}
