// Data shapes of the events the producer and the worker write. Field names follow the projector's
// event-data.ts (src/projector/event-data.ts); these are the writer's side, with what each field means.

export interface TurnQueuedData {
  /** The rendered prompt (placeholders filled). */
  prompt: string;
  cwd: string;
  model?: string;
  /** W3C traceparent of the producer's active span, when there was one. */
  traceparent?: string;
  idempotencyKey?: string;
  /** Names (never values) of the env overlay; `ref:` marks a worker-env reference. */
  env?: string[];
  onLostSession?: string;
}

export interface AttemptStartedData {
  worker: string;
  attempt: number;
  cwd: string;
  model?: string;
  /** The CLI session id passed to --resume, when resuming. */
  resume?: string;
  /** seq of the session.snapshot restored into this run's config home. */
  snapshotSeq?: number;
  traceparent?: string;
}

export interface CliExitData {
  code: number | null;
  signal: string | null;
  durationMs: number;
  pid?: number;
}

export interface AttemptAbandonedData {
  /** worker_crashed | lease_lost | fenced | shutdown | cancelled | lost_session | <error kind> */
  reason: string;
  attempt: number;
  /** Whether another attempt of the turn follows. */
  retry: boolean;
  delayMs?: number;
  /** Set when the abandoned attempt is recorded by a later attempt (the worker that ran it died). */
  detectedBy?: number;
}

export interface TurnFinishedData {
  /** The accepted attempt: its cli.line events are the turn's output. */
  attempt: number;
  cliSessionId?: string;
  costUsd?: number;
  durationMs?: number;
  resultText?: string;
}

export interface TurnFailedData {
  attempt: number;
  errorKind: string;
  error: { name: string; message: string };
  retryable: boolean;
}

export interface TurnCancelledData {
  reason?: string;
  by?: string;
  attempt?: number;
}

export interface SessionSnapshotData {
  cliSessionId: string;
  /**
   * The session file's bytes as the CLI wrote them, scrubbed like cli.line text unless the worker
   * keeps raw lines, base64 (big ones go to a blob); with `baseSeq`, only the bytes appended since
   * the snapshot at that seq.
   */
  base64: string;
  /** Length and sha256 of the whole file. */
  bytes: number;
  sha256: string;
  /** The snapshot this one extends (its file is a prefix of this one's). */
  baseSeq?: number;
  /** Deltas back to a whole snapshot (absent: this one is whole). */
  depth?: number;
}

export interface SessionReplayedData {
  by: "worker";
  reason: "lost_session";
  previousCliSessionId?: string;
  cliSessionId?: string;
  /** Turns whose transcript was carried into the new session's prompt. */
  turns: number;
}
