// "turnstream/worker": the fleet's processes: the worker that takes turns off the queue and runs them,
// with what it is set up with (its model gateway's policy door, the decision hub of supervised mode,
// the scrubber, logger and tracing its output passes through), and the web console over the queue
// and the logs.
export {
  startTurnWorker,
  workerConfigFromEnv,
  WorkerConfigError,
  WorkspaceNotAllowedError,
  type RetryPolicy,
  type TurnWorker,
  type TurnWorkerOptions,
  type WarmOptions,
  type WorkerEnvConfig,
} from "../worker/index.ts";

// The connection a worker is given.
export { connectRedis, type ConnectOptions, type RedisClient } from "../log/index.ts";

// The model gateway's policy door: TurnWorkerOptions.gatewayPolicy (several composed into one), and
// the fleet cooldown's settings: TurnWorkerOptions.cooldown.
export {
  composePolicies,
  type CooldownSettings,
  type GatewayPolicy,
  type ModelCall,
  type PolicyCall,
  type PolicyDecision,
  type UpstreamAnswer,
} from "../gateway/index.ts";

// Supervised mode, the hub's side (a worker starts one of its own when a turn is supervised).
export { startDecisionHub, type DecisionHub, type DecisionHubOptions } from "../decisions/index.ts";

// The web console.
export { startDashboard, type Dashboard, type DashboardOptions } from "../dashboard/index.ts";

// The scrubber, the logger and tracing.
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
} from "../telemetry/index.ts";
