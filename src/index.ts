// The turnstream library ("turnstream"): everything the README shows, by name, so nothing internal
// leaks. test/package/exports.json holds this list; the CLI's stream-json language is
// "turnstream/protocol" and the scripted model server "turnstream/testing".

// Producing turns and following them (src/queue/).
export {
  createProducer,
  InvalidTurnError,
  MissingVariableError,
  UnknownTurnError,
  WaitTimeoutError,
  type CancelResult,
  type EnqueueInput,
  type EnqueueResult,
  type EnvRef,
  type LostSessionPolicy,
  type Producer,
  type QueueConfig,
  type TurnOptions,
  type TurnResult,
  type TurnStatus,
  type WaitOptions,
} from "./queue/index.ts";

// Running turns from the queue (src/worker/).
export {
  startTurnWorker,
  workerConfigFromEnv,
  WorkerConfigError,
  WorkspaceNotAllowedError,
  type RetryPolicy,
  type TurnWorker,
  type TurnWorkerOptions,
  type WorkerEnvConfig,
} from "./worker/index.ts";

// The model gateway's policy door (src/gateway/): TurnWorkerOptions.gatewayPolicy.
export { type GatewayPolicy, type ModelCall, type PolicyCall, type PolicyDecision } from "./gateway/index.ts";

// Read models, replay and rendering (src/projector/).
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
} from "./projector/index.ts";

// The web console (src/dashboard/).
export { startDashboard, type Dashboard, type DashboardOptions } from "./dashboard/index.ts";

// Supervised mode: the decision hub, operator decisions and keys (src/decisions/).
export {
  decide,
  DecisionError,
  generateOperatorKey,
  listPending,
  startDecisionHub,
  type DecideInput,
  type DecideResult,
  type DecideTarget,
  type DecisionHub,
  type DecisionHubOptions,
  type GeneratedOperatorKey,
  type ListPendingOptions,
  type PendingRequest,
} from "./decisions/index.ts";

// Failure kinds and their verdicts (src/events/): the outcome and exit code `turnstream run --wait`
// gives a turn's end, and the base class of turnstream's errors (src/kernel/).
export {
  FAILURE_KINDS_TABLE,
  outcomeOf,
  type ExitCode,
  type FailureKind,
  type FailureKindInfo,
  type KnownErrorKind,
  type Outcome,
  type TurnEnding,
  type TurnVerdict,
} from "./events/index.ts";
export { TurnstreamError, type TurnstreamErrorOptions } from "./kernel/index.ts";

// Running one CLI turn, thread sessions, config homes and session files (src/cli/).
export {
  captureSessionFile,
  ClaudeCodeCliError,
  CliNotFoundError,
  ContainmentError,
  InMemorySessionStore,
  LimitExceededError,
  LostSessionError,
  NoAuthError,
  restoreSessionFile,
  resolveClaudeBin,
  runThreadTurn,
  runTurn,
  sweep,
  type CliErrorKind,
  type ConfigHomeOptions,
  type FreshReason,
  type RunTurnOptions,
  type SessionStore,
  type SkillSpec,
  type StoredSession,
  type SweepOptions,
  type SweepResult,
  type ThreadTurnHandle,
  type ThreadTurnOptions,
  type ThreadTurnOutcome,
  type TurnHandle,
  type TurnOutcome,
  WorkspacePathError,
  type WorkspacePathProblem,
} from "./cli/index.ts";

// The event log (src/log/).
export {
  connectRedis,
  createEventLog,
  ConflictError,
  EventLog,
  exportJsonl,
  FencedError,
  importFile,
  InvalidEventError,
  InvalidSessionIdError,
  LogRolledBackError,
  DurabilityError,
  type AppendResult,
  type ConnectOptions,
  type Envelope,
  type EventInput,
  type EventLogOptions,
  type ReadOptions,
  type RedisClient,
  type TailOptions,
} from "./log/index.ts";

// The scrubber, the logger and tracing (src/telemetry/).
export {
  createLogger,
  createScrubber,
  RedactingSpanExporter,
  scrubError,
  startTelemetry,
  TelemetryConfigError,
  type CreateLoggerOptions,
  type Logger,
  type Scrubber,
  type ScrubberOptions,
  type StartTelemetryOptions,
  type Telemetry,
} from "./telemetry/index.ts";
