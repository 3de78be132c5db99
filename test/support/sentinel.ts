// A Redis Sentinel deployment on loopback, for failover tests: a primary, one replica and three
// sentinels (quorum 2), each process with its own temp dir and config file. Readiness is asked of the
// servers themselves (replication link up, every sentinel knowing the replica and the two others).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort, startRedisServer, type RedisServer } from "./redis-server.ts";

export const SENTINEL_PRIMARY_NAME = "mymaster";

export interface SentinelRig {
  primary: RedisServer;
  replica: RedisServer;
  sentinelPorts: number[];
  /** `redis-sentinel://127.0.0.1:p1,…/mymaster`, for REDIS_URL. */
  url: string;
  /**
   * The primary's address as every sentinel names it now; while they disagree (a failover still
   * spreading), each one's answer. Restarting the old primary before all of them know of the
   * failover lets one that does not turn the promoted replica back into its replica, emptying it.
   */
  primaryAddress(): Promise<string>;
  dispose(): Promise<void>;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > until) throw new Error(`sentinel rig: ${what} not true after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function sentinelConfig(port: number, dir: string, primaryPort: number): string {
  return [
    `port ${port}`,
    "bind 127.0.0.1",
    `dir ${dir}`,
    "protected-mode no",
    'logfile ""',
    `sentinel monitor ${SENTINEL_PRIMARY_NAME} 127.0.0.1 ${primaryPort} 2`,
    `sentinel down-after-milliseconds ${SENTINEL_PRIMARY_NAME} 1000`,
    `sentinel failover-timeout ${SENTINEL_PRIMARY_NAME} 3000`,
    `sentinel parallel-syncs ${SENTINEL_PRIMARY_NAME} 1`,
    "",
  ].join("\n");
}

/** Starts the primary, its replica (in sync) and three sentinels that all see both and each other. */
export async function startSentinelRig(primaryArgs: string[] = []): Promise<SentinelRig> {
  const primary = await startRedisServer({ args: primaryArgs });
  const replica = await startRedisServer({ args: ["--replicaof", "127.0.0.1", String(primary.port), ...primaryArgs] });
  const dirs: string[] = [];
  const procs: ChildProcess[] = [];
  const ports: number[] = [];
  const clients: Redis[] = [];
  try {
    for (let index = 0; index < 3; index++) {
      const port = await freePort();
      const dir = mkdtempSync(join(tmpdir(), "turnstream-sentinel-"));
      const conf = join(dir, "sentinel.conf");
      writeFileSync(conf, sentinelConfig(port, dir, primary.port));
      dirs.push(dir);
      ports.push(port);
      procs.push(spawn("redis-sentinel", [conf], { stdio: "ignore" }));
    }
    const replicaClient = new Redis(replica.url, { lazyConnect: true });
    clients.push(replicaClient);
    await waitFor("replica in sync", async () =>
      (await replicaClient.info("replication")).includes("master_link_status:up"),
    );
    for (const port of ports) {
      const sentinel = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
      clients.push(sentinel);
      await waitFor(`sentinel ${port} knows the replica and the other sentinels`, async () => {
        const replicas = (await sentinel.call("SENTINEL", "REPLICAS", SENTINEL_PRIMARY_NAME)) as unknown[];
        const others = (await sentinel.call("SENTINEL", "SENTINELS", SENTINEL_PRIMARY_NAME)) as unknown[];
        return replicas.length === 1 && others.length === 2;
      });
    }
  } catch (err) {
    for (const client of clients) client.disconnect();
    for (const proc of procs) proc.kill("SIGKILL");
    await Promise.all([primary.dispose(), replica.dispose()]);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const [replicaClient, ...sentinels] = clients;
  replicaClient!.disconnect();
  return {
    primary,
    replica,
    sentinelPorts: ports,
    url: `redis-sentinel://${ports.map((p) => `127.0.0.1:${p}`).join(",")}/${SENTINEL_PRIMARY_NAME}`,
    async primaryAddress() {
      const named = await Promise.all(
        sentinels.map(async (sentinel) => {
          const answer = await sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_PRIMARY_NAME);
          const [host, port] = answer as [string, string];
          return `${host}:${port}`;
        }),
      );
      return new Set(named).size === 1 ? named[0]! : `disagreeing: ${named.join(", ")}`;
    },
    async dispose() {
      for (const sentinel of sentinels) sentinel.disconnect();
      const exits = procs.map((p) =>
        p.exitCode !== null ? Promise.resolve() : new Promise((resolve) => p.once("exit", resolve)),
      );
      for (const proc of procs) proc.kill("SIGKILL");
      await Promise.all(exits);
      await Promise.all([primary.dispose(), replica.dispose()]);
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    },
  };
}
