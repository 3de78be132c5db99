// Where a fleet keeps its log and its queue, as the environment says: TURNSTREAM_PREFIX,
// TURNSTREAM_QUEUE_PREFIX, TURNSTREAM_QUEUE_NAME and TURNSTREAM_DURABILITY. This is the one reading of
// them: the commands lay their flags over it, the worker process starts from it, and createProducer,
// createTurnQueue and startTurnWorker take from it each option they are not given, so a library
// process finds the same fleet as the commands and workers beside it. An empty variable counts as unset.

/** The queue's and the log's settings that the environment can give. */
export interface QueueEnvConfig {
  /** TURNSTREAM_PREFIX: the event log's key prefix. */
  logPrefix?: string;
  /** TURNSTREAM_QUEUE_PREFIX: BullMQ's prefix, one hash tag. */
  queuePrefix?: string;
  /** TURNSTREAM_QUEUE_NAME. */
  queueName?: string;
  /** TURNSTREAM_DURABILITY: when an append counts as done. */
  durability?: string;
}

const VARIABLES = {
  logPrefix: "TURNSTREAM_PREFIX",
  queuePrefix: "TURNSTREAM_QUEUE_PREFIX",
  queueName: "TURNSTREAM_QUEUE_NAME",
  durability: "TURNSTREAM_DURABILITY",
} as const satisfies Record<keyof QueueEnvConfig, string>;

/** The settings the environment gives; a variable that is unset or empty is left out. */
export function queueConfigFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): QueueEnvConfig {
  const out: QueueEnvConfig = {};
  for (const [setting, variable] of Object.entries(VARIABLES) as [keyof QueueEnvConfig, string][]) {
    const value = env[variable];
    if (value !== undefined && value !== "") out[setting] = value;
  }
  return out;
}

/** `options` with each of these settings it leaves undefined taken from the environment. */
export function withQueueEnvDefaults<T extends { [K in keyof QueueEnvConfig]?: string | undefined }>(
  options: T,
  env: Readonly<Record<string, string | undefined>> = process.env,
): T {
  const fromEnv = queueConfigFromEnv(env);
  const out = { ...options };
  for (const setting of Object.keys(VARIABLES) as (keyof QueueEnvConfig)[])
    if (out[setting] === undefined && fromEnv[setting] !== undefined)
      (out as QueueEnvConfig)[setting] = fromEnv[setting];
  return out;
}
