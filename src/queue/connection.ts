// BullMQ wants connections that retry forever (maxRetriesPerRequest: null) for its blocking calls;
// the caller's client (used for the log and the ordering scripts) keeps its own settings.
import type { ErrorReporter } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { explainRedisError, isCluster, redisAddress } from "../log/index.ts";

export function bullConnection(client: RedisClient): RedisClient {
  if (isCluster(client)) {
    return client.duplicate(undefined, {
      redisOptions: { ...client.options.redisOptions, maxRetriesPerRequest: null },
      maxRetriesPerRequest: null,
    } as never);
  }
  return client.duplicate({ maxRetriesPerRequest: null, enableOfflineQueue: true });
}

/**
 * Reports the error events of a BullMQ queue or worker (its connections' errors arrive there too) as
 * `msg`, and those of `client`, the connection it was given, once BullMQ has taken its own listener
 * off (it does on close, while the client may still be reconnecting). Without a listener BullMQ
 * prints each error event to the console, and ioredis each connection error, stack and all.
 */
export function reportBullErrors(
  bull: { on(event: "error", listener: (err: Error) => void): unknown },
  client: RedisClient,
  report: ErrorReporter,
  msg: string,
  fields: Record<string, unknown> = {},
): void {
  // Said as which Redis, what failed and what to check, not as ioredis words it.
  const explain = (err: Error): Error => explainRedisError(err, redisAddress(client));
  bull.on("error", (err: Error) => report(msg, explain(err), fields));
  client.on("error", (err: Error) => {
    if (client.listenerCount("error") === 1)
      report("redis connection error", explain(err), { ...fields, connection: "queue" });
  });
}
