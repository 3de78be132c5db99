// Redis for the projector's commands: one connection attempt with a clear message when Redis is
// not there (the URL is shown without credentials), instead of ioredis retrying forever.
import { withTimeout } from "../kernel/index.ts";
import {
  connectRedis,
  explainRedisError,
  RedisUnavailableError,
  redisUrlForDisplay,
  type RedisClient,
} from "../log/index.ts";

export { RedisUnavailableError, redisUrlForDisplay };

/** Connects and pings within `timeoutMs`; throws RedisUnavailableError (saying why, when Redis said) otherwise. */
export async function connectForCommand(timeoutMs = 3000): Promise<RedisClient> {
  const redis = connectRedis({
    redisOptions: {
      maxRetriesPerRequest: 1,
      connectTimeout: timeoutMs,
      retryStrategy: (n: number) => Math.min(100 * n, 2000),
    },
  });
  // Reported below as one clear error; the connection's own error (WRONGPASS, ECONNREFUSED…) says most.
  let connectionError: unknown;
  redis.on("error", (err: unknown) => (connectionError = err));
  try {
    await withTimeout(redis.ping(), timeoutMs, "timeout");
    return redis;
  } catch (err) {
    redis.disconnect();
    const explained = explainRedisError(connectionError ?? err, redisUrlForDisplay(), "connecting");
    throw explained instanceof RedisUnavailableError
      ? explained
      : new RedisUnavailableError(redisUrlForDisplay(), "unreachable", "connecting");
  }
}
