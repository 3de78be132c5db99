// Executing turns: the BullMQ turn worker (lease → restore → run CLI → append → snapshot → release).
export { startTurnWorker, type TurnWorker } from "./worker.ts";
export {
  compileWorkerOptions,
  WORKER_DEFAULTS,
  type TurnWorkerOptions,
  type WarmOptions,
  type WorkerEnvConfig,
  type WorkerSettings,
  type WorkspaceTrust,
} from "./options.ts";
export { executeTurnJob } from "./execute.ts";
export type { ExecuteDeps, RunningTurn, StopReason, TurnJobResult } from "./types.ts";
export { DEFAULT_RETRY, retryDelayMs, type RetryPolicy } from "./retry.ts";
export { underRoots, WorkspaceNotAllowedError } from "./workspace.ts";
export { parseWorkspaceRoots, workerConfigFromEnv, WorkerConfigError } from "./config.ts";
// The log's own queries, under the names the worker has always exported them by.
export { danglingAttempts, lastCliSessionId } from "../log/index.ts";
export { rebuildTranscript } from "./resume.ts";
export {
  assembleSnapshot,
  latestSnapshot,
  MAX_SNAPSHOT_DEPTH,
  SnapshotCache,
  snapshotData,
  snapshotRecord,
  type Snapshot,
} from "./snapshots.ts";
export { compileRunLimits, describeRunLimitSettings, runLimitsFromEnv, type RunLimitSettings } from "./limits.ts";
export { queueKeyOf, readWorkers, type WorkerEntry } from "./registry.ts";
export { runWorkerMain } from "./main.ts";
