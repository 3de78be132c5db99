// "turnstream/log": reading and keeping what turns wrote: the per-session event log (append, read,
// tail, JSONL export and import), read models and the live projector, replay and rendering. It loads
// the Redis client but not the queue or tracing (the web console, which shows the queue too, is in
// "turnstream/worker" with the fleet's other processes).
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
