// Redis for the log benches: the server at --url, else a private redis-server started for the run, so
// nothing else on the machine's Redis shares its keys or its CPU time.
import { connectRedis, type RedisClient } from "../src/log/index.ts";
import { startRedisServer } from "../test/support/redis-server.ts";

export interface BenchRedis {
  url: string;
  redis: RedisClient;
  /** Disconnects, and stops the private server if one was started. */
  close(): Promise<void>;
}

export async function benchRedis(url: string | undefined): Promise<BenchRedis> {
  const server = url === undefined ? await startRedisServer() : undefined;
  const at = url ?? server!.url;
  // No env: the bench measures the server named here, never a cluster named in the environment.
  const redis = connectRedis({ url: at, clusterNodes: undefined, env: {} });
  return {
    url: at,
    redis,
    async close() {
      redis.disconnect();
      await server?.dispose();
    },
  };
}
