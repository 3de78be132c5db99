// BullMQ wants connections that retry forever (maxRetriesPerRequest: null) for its blocking calls;
// the caller's client (used for the log and the ordering scripts) keeps its own settings.
import type { ErrorReporter } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import { isCluster } from "../log/index.ts";

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
  bull.on("error", (err: Error) => report(msg, err, fields));
  client.on("error", (err: Error) => {
    if (client.listenerCount("error") === 1) report("redis connection error", err, { ...fields, connection: "queue" });
  });
}
