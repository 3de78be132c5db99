// Redis for the projector's commands: one connection attempt with a clear message when Redis is
// not there (the URL is shown without credentials), instead of ioredis retrying forever.
import { withTimeout } from "../kernel/index.ts";
import { connectRedis, DEFAULT_REDIS_URL, type RedisClient } from "../log/index.ts";

export class RedisUnavailableError extends Error {
  override readonly name = "RedisUnavailableError";
  readonly url: string;
  constructor(url: string) {
    super(
      `cannot reach Redis at ${url}; start one (docker compose up -d redis, or redis-server --port 6379) ` +
        `or point REDIS_URL / REDIS_CLUSTER_NODES at yours`,
    );
    this.url = url;
  }
}

export function redisUrlForDisplay(env: NodeJS.ProcessEnv = process.env): string {
  const nodes = env["REDIS_CLUSTER_NODES"];
  if (nodes) return `cluster ${nodes}`;
  const raw = env["REDIS_URL"] || DEFAULT_REDIS_URL;
  try {
    const u = new URL(raw);
    u.username = "";
    u.password = "";
    return u.toString();
  } catch {
    return "(REDIS_URL is not a URL)";
  }
}

/** Connects and pings within `timeoutMs`; throws RedisUnavailableError otherwise. */
export async function connectForCommand(timeoutMs = 3000): Promise<RedisClient> {
  const redis = connectRedis({
    redisOptions: { maxRetriesPerRequest: 1, connectTimeout: timeoutMs, retryStrategy: (n: number) => Math.min(100 * n, 2000) },
  });
  redis.on("error", () => {}); // reported below as one clear error
  try {
    await withTimeout(redis.ping(), timeoutMs, "timeout");
    return redis;
  } catch {
    redis.disconnect();
    throw new RedisUnavailableError(redisUrlForDisplay());
  }
}
