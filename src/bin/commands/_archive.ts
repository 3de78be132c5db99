// The archive's wiring for the commands: retention's age and period (TURNSTREAM_RETENTION,
// TURNSTREAM_RETENTION_INTERVAL), one retention run over the log and the queue, the projector's
// periodic run, and a producer that brings an archived session back before it enqueues to it.
import {
  archiveRestorer,
  InvalidArchiveUrlError,
  runRetention,
  summaryOfState,
  type Archive,
  type RetentionReport,
} from "../../archive/index.ts";
import { parseDuration, TurnstreamError, type Logger } from "../../kernel/index.ts";
import { createEventLog, DEFAULT_PREFIX, type RedisClient } from "../../log/index.ts";
import type { PeriodicTask, ProjectorAttachments } from "../../projector/index.ts";
import {
  closeTurnQueue,
  createProducer,
  createTurnQueue,
  queueConfigFromEnv,
  type Producer,
  type QueueConfig,
} from "../../queue/index.ts";
import { openArchiveOf } from "./_connect.ts";

/** How old an ended session's last event must be before retention moves it, when nothing says otherwise. */
export const DEFAULT_RETENTION = "7d";

export class BadRetentionSettingError extends TurnstreamError {
  constructor(name: string, value: string) {
    super(`${name} takes a duration such as 12h or 7d, got '${value}'`, { code: "bad_retention_setting" });
  }
}

/** The age of --older-than, else TURNSTREAM_RETENTION, else 7d, in milliseconds. */
export function retentionAgeMs(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): number {
  const [name, text] =
    flag !== undefined
      ? ["--older-than", flag]
      : ["TURNSTREAM_RETENTION", env["TURNSTREAM_RETENTION"] || DEFAULT_RETENTION];
  const ms = parseDuration(text);
  if (ms === undefined) throw new BadRetentionSettingError(name, text);
  return ms;
}

/** TURNSTREAM_RETENTION_INTERVAL in milliseconds, or undefined when unset (no periodic retention). */
export function retentionIntervalMs(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const text = env["TURNSTREAM_RETENTION_INTERVAL"];
  if (text === undefined || text === "") return undefined;
  const ms = parseDuration(text);
  if (ms === undefined) throw new BadRetentionSettingError("TURNSTREAM_RETENTION_INTERVAL", text);
  return ms;
}

export interface RetentionRun {
  redis: RedisClient;
  logPrefix: string;
  queue: Pick<QueueConfig, "queuePrefix" | "queueName">;
  archive: Archive | undefined;
  olderThanMs: number;
  discardHistory?: boolean;
  dryRun?: boolean;
}

/** One retention run over the log under `logPrefix` and the turn queue (whose job records go with a session). */
export async function retentionOnce(run: RetentionRun): Promise<RetentionReport> {
  const queue = createTurnQueue({ redis: run.redis, ...run.queue });
  try {
    return await runRetention({
      log: createEventLog({ redis: run.redis, prefix: run.logPrefix }),
      redis: run.redis,
      queue,
      archive: run.archive,
      olderThanMs: run.olderThanMs,
      discardHistory: run.discardHistory === true,
      dryRun: run.dryRun === true,
    });
  } finally {
    await closeTurnQueue(queue);
  }
}

/** How many sessions each action took, for one log line or one summary line. */
export function retentionCounts(report: RetentionReport): Record<string, number> {
  const counts: Record<string, number> = { archived: 0, removed: 0, kept: 0, failed: 0 };
  for (const entry of report.sessions) counts[entry.action] = (counts[entry.action] ?? 0) + 1;
  return counts;
}

/**
 * The archive's work in a projector process (TURNSTREAM_ARCHIVE): each session's summary row kept
 * current as its read models catch up, and, with TURNSTREAM_RETENTION_INTERVAL, retention that
 * often. A projector never discards history: without an archive the interval is only warned about.
 */
export async function projectorArchiveWork(
  redis: RedisClient,
  logPrefix: string,
  logger: Logger,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ProjectorAttachments> {
  const everyMs = retentionIntervalMs(env);
  // Both settings are read before the archive is opened, so a malformed one stops the process first.
  const schedule = everyMs === undefined ? undefined : { everyMs, olderThanMs: retentionAgeMs(undefined, env) };
  const archive = await openArchiveOf(undefined, env);
  if (archive === undefined) {
    if (everyMs !== undefined)
      logger.warn(
        { everyMs },
        "TURNSTREAM_RETENTION_INTERVAL is set but no archive is: set TURNSTREAM_ARCHIVE for periodic retention",
      );
    return {};
  }
  return {
    onCaughtUp: (session, state) => archive.upsertSummary(summaryOfState(session, state)),
    periodic: schedule === undefined ? [] : [retentionTask(redis, logPrefix, archive, schedule, env)],
    close: () => archive.close(),
  };
}

/** Retention as a periodic task: one run each period, its counts (and the first failures) logged. */
function retentionTask(
  redis: RedisClient,
  logPrefix: string,
  archive: Archive,
  { everyMs, olderThanMs }: { everyMs: number; olderThanMs: number },
  env: NodeJS.ProcessEnv,
): PeriodicTask {
  const { queuePrefix, queueName } = queueConfigFromEnv(env);
  const queue = {
    ...(queuePrefix === undefined ? {} : { queuePrefix }),
    ...(queueName === undefined ? {} : { queueName }),
  };
  return {
    name: "retention",
    everyMs,
    async run() {
      const report = await retentionOnce({ redis, logPrefix, queue, archive, olderThanMs });
      const failed = report.sessions.filter((entry) => entry.action === "failed");
      return {
        archive: archive.location,
        olderThanMs,
        ...retentionCounts(report),
        ...(failed.length === 0
          ? {}
          : { failures: failed.slice(0, 10).map((entry) => `${entry.session}: ${entry.reason}`) }),
      };
    },
  };
}

/**
 * A producer for a command that enqueues: with an archive (--archive or TURNSTREAM_ARCHIVE), each
 * enqueue first restores its session when retention moved it there. Closing it closes the archive.
 */
export async function producerWithArchive(
  config: QueueConfig,
  archiveFlag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Producer> {
  const archive = await openArchiveOf(archiveFlag, env);
  if (archive === undefined) return createProducer(config);
  const log = createEventLog({ redis: config.redis, prefix: config.logPrefix ?? DEFAULT_PREFIX });
  const producer = createProducer({ ...config, restore: archiveRestorer(log, config.redis, archive) });
  return {
    ...producer,
    async close() {
      await producer.close();
      await archive.close();
    },
  };
}

/**
 * The archive of --archive or TURNSTREAM_ARCHIVE (undefined: none named), or "usage" after saying on
 * stderr why its URL names no store: a setting to fix (exit 2), not a store that does not answer.
 */
export async function archiveOrUsage(
  command: string,
  flag: string | undefined,
): Promise<Archive | undefined | "usage"> {
  try {
    return await openArchiveOf(flag);
  } catch (err) {
    if (!(err instanceof InvalidArchiveUrlError)) throw err;
    process.stderr.write(`turnstream ${command}: ${err.message}\n`);
    return "usage";
  }
}
