// `turnstream healthcheck`: exits 0 when the Redis this process is configured for answers, for
// container health checks (the image has no HTTP client and the services no health endpoint yet).
import { parseArgs } from "node:util";
import { redisOrExplain } from "./_connect.ts";

export const summary = "exit 0 when Redis (REDIS_URL / REDIS_CLUSTER_NODES) answers, 3 when it does not: a container health check";

const USAGE = "usage: turnstream healthcheck\n  Pings the Redis of REDIS_URL or REDIS_CLUSTER_NODES: exit 0 when it answers, 3 when it does not.\n";

export async function run(argv: string[]): Promise<number> {
  try {
    const { values } = parseArgs({ args: argv, options: { help: { type: "boolean", short: "h" } } });
    if (values.help === true) {
      process.stdout.write(USAGE);
      return 0;
    }
  } catch (err) {
    process.stderr.write(`turnstream healthcheck: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const redis = await redisOrExplain("healthcheck");
  if (redis === undefined) return 3;
  redis.disconnect();
  return 0;
}
