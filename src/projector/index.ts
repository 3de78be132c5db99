// Public surface of the projector: pure reducers over the event log, the live projector that keeps
// read models in Redis, and replay from the log alone.
export { applyEvent, fold, foldAsync, initialState, reduceSession, MAX_RESULT_CHARS } from "./reduce.ts";
export type { ReducibleEnvelope } from "./reduce.ts";
export * from "./state.ts";
export { renderTranscriptText, toMessages, acceptedAttempt } from "./render.ts";
export type { TextOptions } from "./render.ts";
export { startProjector } from "./live.ts";
import type { ProjectorProcessOptions } from "./process.ts";

/**
 * Runs the projector as a process (metrics, ops endpoint, signals) until a signal stops it. Loaded on
 * call: the process's telemetry and metrics would make every reader of read models load OpenTelemetry.
 */
export async function runProjectorProcess(options: ProjectorProcessOptions): Promise<number> {
  const processEntry = await import("./process.ts");
  return processEntry.runProjectorProcess(options);
}
export type { Projector, ProjectorOptions, ProjectorStats } from "./live.ts";
export type { PeriodicTask } from "./periodic.ts";
export type { ProjectorAttachments, ProjectorEntryOptions } from "./process.ts";
export { SessionProjection } from "./session-projection.ts";
export type { SessionProjectionOptions, StepResult } from "./session-projection.ts";
export {
  PROJECTION_VERSION,
  commitProjection,
  decodeState,
  deleteProjection,
  encodeState,
  projectionKeys,
  readModel,
  readPointer,
  readSummary,
} from "./store.ts";
export type { CommitOutcome, CommitReply, ProjectionKeys, ReadModel, ReadModelOptions } from "./store.ts";
export { parseUntil, replaySession, replayWithSleep, UnknownSessionError } from "./replay.ts";
export type { ReplayObserver, ReplayOptions, ReplaySleep, Until } from "./replay.ts";
export { createOutput, paint } from "./output.ts";
export type { Output, OutputOptions, Scrub } from "./output.ts";
export { summarizeCliLine, summarizeEvent } from "./event-summary.ts";
export { connectForCommand, RedisUnavailableError, redisUrlForDisplay } from "./connect.ts";
export {
  FOLD_LIMIT,
  inBatches,
  LISTING_CONCURRENCY,
  listingRow,
  rowMatches,
  sessionRow,
  sessionRowOf,
} from "./listing.ts";
export type { RowSource, SessionRow } from "./listing.ts";
export { AtifFacts, ATIF_AGENT_NAME, ATIF_SCHEMA_VERSION, toAtif } from "./atif.ts";
export type {
  AtifAgent,
  AtifFinalMetrics,
  AtifMetrics,
  AtifObservationResult,
  AtifOptions,
  AtifStep,
  AtifSubagentRef,
  AtifToolCall,
  AtifTrajectory,
} from "./atif.ts";
