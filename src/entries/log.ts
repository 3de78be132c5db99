// "turnstream/log": reading and keeping what turns wrote: the per-session event log (append, read,
// tail, JSONL export and import), read models and the live projector, replay and rendering, and the
// web console that shows them.
export {
  connectRedis,
  createEventLog,
  ConflictError,
  DurabilityError,
  EventLog,
  exportJsonl,
  FencedError,
  importFile,
  InvalidEventError,
  InvalidSessionIdError,
  LogRolledBackError,
  type AppendResult,
  type ConnectOptions,
  type Envelope,
  type EventInput,
  type EventLogOptions,
  type Logger,
  type ReadOptions,
  type RedisClient,
  type TailOptions,
} from "../log/index.ts";

// Read models, replay and rendering.
export {
  readModel,
  reduceSession,
  renderTranscriptText,
  replaySession,
  startProjector,
  toMessages,
  UnknownSessionError,
  type Projector,
  type ProjectorOptions,
  type ProjectionState,
  type ReadModel,
  type ReadModelOptions,
  type ReplayOptions,
  type SessionSummary,
  type SessionView,
  type Transcript,
} from "../projector/index.ts";

// The web console.
export { startDashboard, type Dashboard, type DashboardOptions } from "../dashboard/index.ts";
