// BullMQ wants connections that retry forever (maxRetriesPerRequest: null) for its blocking calls;
// the caller's client (used for the log and the ordering scripts) keeps its own settings.
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
