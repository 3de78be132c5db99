// Public surface of the event log.
export {
  createEventLog,
  EventLog,
  DEFAULT_BLOB_CAP_BYTES,
  DEFAULT_UNFENCED_KINDS,
  newWriterId,
  parseBatchId,
} from "./event-log.ts";
export type {
  AppendOptions,
  AppendOutcome,
  AppendResult,
  BeginResult,
  EncodedEvent,
  EventLogOptions,
  HistoryReader,
  ReadOptions,
  SessionStat,
  SnapshotRef,
  TailOptions,
} from "./event-log.ts";
export { AckedSeqs } from "./acked.ts";
export { createWriter } from "./writer.ts";
export { storedEnvelope, storedHead, type StoredHead } from "./stored-head.ts";
export {
  cliLinesBetween,
  danglingAttempts,
  latestParked,
  finishedTurns,
  lastCliSessionId,
  latestSnapshotRef,
  writerCwd,
  type FinishedTurn,
} from "./queries.ts";
export type { Writer, WriteOptions, WriterOptions, WriterStats } from "./writer.ts";
export { checkEnvelope, ENVELOPE_VERSION, envelopeSchema, eventInputSchema, kindSchema } from "./envelope.ts";
export type { Envelope, EnvelopeCheck, EventInput } from "./envelope.ts";
export {
  ConflictError,
  FencedError,
  InvalidEventError,
  InvalidPrefixError,
  InvalidSessionIdError,
  LogRolledBackError,
  UnfencedKindError,
  WriterClosedError,
} from "./errors.ts";
export {
  DEFAULT_PREFIX,
  SESSION_ID_PATTERN,
  assertSessionId,
  indexKey,
  isValidSessionId,
  sessionKeys,
  sessionTag,
} from "./keys.ts";
export type { SessionKeys } from "./keys.ts";
export { connectRedis, DEFAULT_REDIS_URL, isCluster } from "./redis.ts";
export {
  awaitDurable,
  checkDurability,
  DEFAULT_DURABILITY_TIMEOUT_MS,
  DEFAULT_DURABILITY_TRIES,
  describeDurability,
  DurabilityError,
  MEMORY,
  parseDurability,
} from "./durability.ts";
export type { Durability } from "./durability.ts";
export {
  explainRedisError,
  redisAddress,
  redisProblemOf,
  RedisUnavailableError,
  redisUrlForDisplay,
  type RedisProblem,
} from "./redis-errors.ts";
export type { ConnectOptions, RedisClient } from "./redis.ts";
export { luaScript, scriptCommand, type LuaScript } from "./scripts.ts";
export { exportJsonl, importedAt, importEnvelopes, importFile, IMPORTED_FIELD } from "./jsonl.ts";
export type { EnvelopeImportOptions, ImportOptions, ImportResult } from "./jsonl.ts";
export type { Logger } from "../kernel/index.ts";
