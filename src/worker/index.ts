// Executing turns: the BullMQ turn worker (lease → restore → run CLI → append → snapshot → release).
export { startTurnWorker, type TurnWorker, type TurnWorkerOptions } from "./worker.ts";
export { executeTurnJob, type EventObserver, type ExecuteSettings, type RunningTurn, type StopReason, type TurnJobResult } from "./execute.ts";
export { DEFAULT_RETRY, RETRYABLE_KINDS, retryDelayMs, type RetryPolicy } from "./retry.ts";
export { underRoots, WorkspaceNotAllowedError } from "./workspace.ts";
export { parseWorkspaceRoots, workerConfigFromEnv, WorkerConfigError, type WorkerEnvConfig } from "./config.ts";
export { danglingAttempts, lastCliSessionId, latestSnapshot, rebuildTranscript } from "./log-scan.ts";
export { assembleSnapshot, MAX_SNAPSHOT_DEPTH, SnapshotCache, snapshotData, snapshotRecord, type Snapshot } from "./snapshots.ts";
