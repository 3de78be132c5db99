// "turnstream/producer": the application's side of the queue: enqueue turns, wait for or cancel them,
// and answer the decisions supervised turns ask for.
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
} from "../queue/index.ts";

// The connection a producer is given.
export { connectRedis, type ConnectOptions, type RedisClient } from "../log/index.ts";

// Supervised mode, the operator's side: pending requests, decisions, revoking trust rules and operator keys.
export {
  decide,
  DecisionError,
  generateOperatorKey,
  listPending,
  revokeRule,
  RuleRevokeError,
  type DecideInput,
  type DecideResult,
  type DecideTarget,
  type GeneratedOperatorKey,
  type ListPendingOptions,
  type PendingRequest,
  type RevokeInput,
  type RevokeProblem,
  type RevokeResult,
  type RevokeTarget,
} from "../decisions/index.ts";
