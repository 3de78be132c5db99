// Redis for a one-shot command: a clear message when it does not answer (the caller exits 3,
// infrastructure), never ioredis' endless retries.
import {
  archiveUrlForDisplay,
  InvalidArchiveUrlError,
  openArchive,
  SessionHistory,
  type Archive,
} from "../../archive/index.ts";
import {
  createEventLog,
  DEFAULT_PREFIX,
  isValidSessionId,
  type Envelope,
  type HistoryReader,
  type RedisClient,
} from "../../log/index.ts";
import { connectForCommand, RedisUnavailableError } from "../../projector/index.ts";
import { queueConfigFromEnv, type QueueEnvConfig } from "../../queue/index.ts";

export async function redisOrExplain(command: string): Promise<RedisClient | undefined> {
  try {
    return await connectForCommand();
  } catch (err) {
    if (err instanceof RedisUnavailableError) {
      process.stderr.write(`turnstream ${command}: ${err.message}\n`);
      return undefined;
    }
    throw err;
  }
}

/** Reads all of stdin (for prompts, which never belong in argv). */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** The queue's flags of a command that takes them: --prefix, --queue-prefix, --queue override the env. */
export interface QueueFlags {
  prefix?: string | undefined;
  "queue-prefix"?: string | undefined;
  queue?: string | undefined;
}

/** Where the command finds the log and the queue: its flags, else the variables workers and the library read. */
export function queueConfigOf(flags: QueueFlags, env: NodeJS.ProcessEnv = process.env): QueueEnvConfig {
  const fromEnv = queueConfigFromEnv(env);
  const out = { ...fromEnv };
  if (flags.prefix !== undefined) out.logPrefix = flags.prefix;
  if (flags["queue-prefix"] !== undefined) out.queuePrefix = flags["queue-prefix"];
  if (flags.queue !== undefined) out.queueName = flags.queue;
  return out;
}

/** Usage lines of the queue flags, for the commands that take them. */
export const QUEUE_FLAGS_USAGE = `  --prefix P        log key prefix (default: TURNSTREAM_PREFIX or "ts:")
  --queue-prefix Q  queue prefix (default: TURNSTREAM_QUEUE_PREFIX or "{turnstream}")
  --queue NAME      queue name (default: TURNSTREAM_QUEUE_NAME or "turns")
`;

export const QUEUE_FLAG_OPTIONS = {
  prefix: { type: "string" },
  "queue-prefix": { type: "string" },
  queue: { type: "string" },
} as const;

/** The event log's key prefix: --prefix, else TURNSTREAM_PREFIX, else the log's default. */
export function logPrefix(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag ?? queueConfigFromEnv(env).logPrefix ?? DEFAULT_PREFIX;
}

/** True (after saying why on stderr) when `session` is not a valid session id. */
export function rejectSessionId(command: string, session: string): boolean {
  if (isValidSessionId(session)) return false;
  process.stderr.write(`turnstream ${command}: session id must be 1-128 characters from A-Z a-z 0-9 _ . -\n`);
  return true;
}

/** A session's events, read whole (from Redis or the archive when `reader` is a SessionHistory). */
export async function readSession(reader: Pick<HistoryReader, "read">, session: string): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const event of reader.read(session)) out.push(event);
  return out;
}

/** The --archive flag of the commands that read a session's history. */
export const ARCHIVE_FLAG_OPTIONS = { archive: { type: "string" } } as const;

export const ARCHIVE_FLAG_USAGE = `  --archive URL     where retention moved ended sessions: file://DIR or postgres://… (default:
                    TURNSTREAM_ARCHIVE; none: Redis only); no password here (argv is public): put
                    it in TURNSTREAM_ARCHIVE or PGPASSWORD
`;

/** The archive's URL: --archive, else TURNSTREAM_ARCHIVE, else none. */
export function archiveUrl(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const url = flag ?? env["TURNSTREAM_ARCHIVE"];
  return url === undefined || url === "" ? undefined : url;
}

/**
 * Where a command reads sessions: the log under `prefix`, and the archive of --archive or
 * TURNSTREAM_ARCHIVE when one is given. Its `close()` closes the archive; the caller owns Redis.
 */
export async function openHistory(
  redis: RedisClient,
  prefix: string,
  archiveFlag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<SessionHistory> {
  return new SessionHistory(createEventLog({ redis, prefix }), await openArchiveOf(archiveFlag, env));
}

/** The archive of --archive, else TURNSTREAM_ARCHIVE, opened; undefined when neither names one. */
export async function openArchiveOf(
  archiveFlag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Archive | undefined> {
  const url = archiveUrl(archiveFlag, env);
  if (url === undefined) return undefined;
  const archive = openArchive(url);
  // argv is visible to every user of the machine (ps, /proc) and lands in shell history: a secret
  // never goes there. Refused by name, before anything connects with it (a URL no store takes is
  // refused first, for what it is).
  if (archiveFlag !== undefined && urlHasPassword(archiveFlag)) {
    await archive.close();
    throw new InvalidArchiveUrlError(
      archiveUrlForDisplay(archiveFlag),
      "--archive is a command-line flag and a password there is readable by anyone on the machine: " +
        "give the URL in TURNSTREAM_ARCHIVE, or the password in PGPASSWORD or ~/.pgpass",
    );
  }
  return archive;
}

/** True when a URL carries a password, as user:password@ or as libpq's ?password= parameter. */
function urlHasPassword(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.password !== "" || parsed.searchParams.has("password");
  } catch {
    // Not a URL at all: openArchive refuses it without showing it.
    return false;
  }
}
