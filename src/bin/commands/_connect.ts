// Redis for a one-shot command: a clear message and exit code 1 when it does not answer.
import { DEFAULT_PREFIX, isValidSessionId, type RedisClient } from "../../log/index.ts";
import { connectForCommand, RedisUnavailableError } from "../../projector/index.ts";

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
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Where the commands find the log and the queue: the same variables the worker reads. */
export function queueConfigFromEnv(env: NodeJS.ProcessEnv = process.env): { logPrefix?: string; queuePrefix?: string; queueName?: string } {
  const out: { logPrefix?: string; queuePrefix?: string; queueName?: string } = {};
  if (env["TURNSTREAM_PREFIX"]) out.logPrefix = env["TURNSTREAM_PREFIX"];
  if (env["TURNSTREAM_QUEUE_PREFIX"]) out.queuePrefix = env["TURNSTREAM_QUEUE_PREFIX"];
  if (env["TURNSTREAM_QUEUE_NAME"]) out.queueName = env["TURNSTREAM_QUEUE_NAME"];
  return out;
}

/** The event log's key prefix: --prefix, else TURNSTREAM_PREFIX, else the log's default. */
export function logPrefix(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag ?? env["TURNSTREAM_PREFIX"] ?? DEFAULT_PREFIX;
}

/** True (after saying why on stderr) when `session` is not a valid session id. */
export function rejectSessionId(command: string, session: string): boolean {
  if (isValidSessionId(session)) return false;
  process.stderr.write(`turnstream ${command}: session id must be 1-128 characters from A-Z a-z 0-9 _ . -\n`);
  return true;
}
