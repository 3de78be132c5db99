// The turn queue: producer API, job schema, per-session ordering and lease.
export {
  activeTraceparent,
  checkEnqueue,
  closeTurnQueue,
  createProducer,
  createTurnQueue,
  JOB_RETENTION,
  sessionOfTurn,
  turnRecordKey,
  type CancelResult,
  type EnqueueResult,
  type Producer,
  type QueueConfig,
  type SessionRestorer,
  type TurnResult,
  type TurnStatus,
  type WaitOptions,
} from "./producer.ts";
export {
  cwdProblem,
  enqueueInputSchema,
  envOverlaySchema,
  isSecretName,
  JOB_VERSION,
  lostSessionPolicyOf,
  lostSessionPolicySchema,
  parseOrThrow,
  renderPrompt,
  TURN_ID_PATTERN,
  turnJobSchema,
  turnOptionsSchema,
  type EnqueueInput,
  type EnvRef,
  type LostSessionPolicy,
  type TurnJob,
  type TurnOptions,
} from "./schema.ts";
export {
  compileJobEnvPolicy,
  DEFAULT_JOB_ENV_ALLOW,
  EXACT_OPT_IN_ENV_NAMES,
  firstRefusedEnvName,
  jobEnvPolicyFrom,
  refusedEnvName,
  type JobEnvPolicy,
  type RefusedEnvName,
} from "./env-policy.ts";
export {
  InvalidTurnError,
  MissingVariableError,
  SessionRemovedWhileEnqueuingError,
  UnknownTurnError,
  WaitTimeoutError,
} from "./errors.ts";
export { SessionOrder, type AcquireResult, type NextHead, type SessionOrderOptions } from "./order.ts";
export { assertQueuePrefix, DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX, orderKeys, type OrderKeys } from "./keys.ts";
export { bullConnection, reportBullErrors } from "./connection.ts";
export { queueConfigFromEnv, withQueueEnvDefaults, type QueueEnvConfig } from "./env-config.ts";
export { liveWorkerCount, noWorkerWarning, WORKER_CHECK_MS } from "./live-workers.ts";
export { readWaitingTurns, type WaitingSource, type WaitingTurns } from "./waiting.ts";
export { jobRow, QUEUE_STATES, type JobRow } from "./jobs.ts";
export { restoringKey, retireSession, type RetireExpectation, type RetireOutcome } from "./retire.ts";
