// Fair share between tenants: each queued turn gets a BullMQ priority that interleaves tenants (see
// lua/priority.lua), so a tenant that queues a few turns behind another's hundreds is served next,
// not after them. BullMQ's open-source queue has no groups; priorities are what it has.
import type { Queue } from "bullmq";
import { luaScript, scriptCommand, type RedisClient } from "../log/index.ts";
import { fairShareKey } from "./keys.ts";

const PRIORITY = luaScript("turnstreamTenantPriority", 5, new URL("./lua/priority.lua", import.meta.url));

/** BullMQ's highest priority (2^21 - 1, its `PRIORITY_LIMIT`). */
const HIGHEST_PRIORITY = 2 ** 21 - 1;

/** The field of turns without a tenant: they share one place in the rotation. */
const NO_TENANT = "-";

/** The priority the next turn of `tenant` is queued with. */
export async function fairSharePriority(
  redis: RedisClient,
  queue: Queue,
  queuePrefix: string,
  tenant: string | undefined,
): Promise<number> {
  const keys = queue.keys;
  const priority = scriptCommand<number>(redis, PRIORITY);
  return priority(
    [fairShareKey(queuePrefix, queue.name), keys.prioritized!, keys.wait!, keys.delayed!, keys.active!],
    [tenant ?? NO_TENANT, HIGHEST_PRIORITY],
  );
}
