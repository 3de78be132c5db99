// The queue's jobs as listings show them: `turnstream status`, the dashboard's queue view and the
// queue-depth gauge read the same states and the same fields of a job.
import type { Job } from "bullmq";

/** The job states listed and counted, one queue-depth series each. */
export const QUEUE_STATES = ["waiting", "active", "delayed", "prioritized", "failed"] as const;

/** What a listing shows of one job. */
export interface JobRow {
  readonly session: string;
  readonly turn: string;
  /** The attempt running (an active job), else the attempts made so far. */
  readonly attempt: number;
  /** When a worker took the job (ISO), if one has. */
  readonly startedAt: string | undefined;
  /** When the job was queued (ISO). */
  readonly queuedAt: string | undefined;
}

const iso = (ms: number | undefined): string | undefined => (ms ? new Date(ms).toISOString() : undefined);

/** A job of `state` as a listing row; a job without turn data shows its id, and "?" for what it lacks. */
export function jobRow(
  job: Pick<Job, "id" | "data" | "attemptsMade" | "processedOn" | "timestamp">,
  state: string,
): JobRow {
  const data = (job.data ?? {}) as { session?: unknown; turn?: unknown };
  return {
    session: String(data.session ?? "?"),
    turn: String(data.turn ?? job.id ?? "?"),
    attempt: job.attemptsMade + (state === "active" ? 1 : 0),
    startedAt: iso(job.processedOn),
    queuedAt: iso(job.timestamp),
  };
}
