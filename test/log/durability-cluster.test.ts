// replicas:1 on a Redis Cluster (three masters, a replica each): every batch the writer is told is in
// is on the replica of its slot's master at that moment; the master is killed -9, the cluster
// promotes its replica, the old master comes back (as the new one's replica), and the writer goes on
// with nothing acknowledged lost (its rollback claim never fires) and every seq once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { connectRedis, createEventLog, createWriter, type Durability } from "../../src/log/index.ts";
import { startRedisCluster } from "../support/redis-cluster.ts";
import { waitUntil } from "../worker/_support.ts";

const line = (i: number) => ({ turn: "t1", attempt: 1, kind: "cli.line", data: { raw: `{"type":"x","i":${i}}` } });

/** The ports of the master serving `key`'s slot and of its replica. */
async function slotOwners(any: Redis, key: string): Promise<{ master: number; replica: number } | undefined> {
  const slot = Number(await any.call("CLUSTER", "KEYSLOT", key));
  const ranges = (await any.call("CLUSTER", "SLOTS")) as [number, number, [string, number], ...[string, number][]][];
  const range = ranges.find(([from, to]) => slot >= from && slot <= to)!;
  return range?.[3] === undefined ? undefined : { master: Number(range[2][1]), replica: Number(range[3][1]) };
}

test(
  "replicas:1 on a Redis Cluster: acknowledged batches are on the slot's replica and survive its master's failover",
  { timeout: 120_000 },
  async (context) => {
    const cluster = await startRedisCluster({ replicas: 1, nodeTimeoutMs: 1000 });
    const redis = connectRedis({ clusterNodes: cluster.nodeList, env: {} });
    redis.on("error", () => undefined);
    const probe = new Redis(cluster.nodes[0]!.url);
    const clients: Redis[] = [probe];
    context.after(async () => {
      redis.disconnect();
      for (const client of clients) client.disconnect();
      await cluster.dispose();
    });
    const level: Durability = { level: "replicas", replicas: 1, timeoutMs: 500, tries: 40 };
    const log = createEventLog({ redis, prefix: "durc:", durability: level });
    const { epoch } = await log.beginAttempt("s1", "t1");
    const writer = createWriter({ log, session: "s1", epoch, backoff: { initialMs: 50, maxMs: 300 } });
    for (let index = 0; index < 100; index++) await writer.write(line(index));
    const seq = await writer.flush();
    const found: { master: number; replica: number }[] = [];
    await waitUntil(
      async () => {
        const owners = await slotOwners(probe, log.keys("s1").events);
        if (owners !== undefined) found.push(owners);
        return owners !== undefined;
      },
      30000,
      "the slot's replica to be listed",
    );
    const owners = found[0]!;
    const replica = new Redis({ host: "127.0.0.1", port: owners.replica });
    replica.on("error", () => undefined);
    clients.push(replica);
    await replica.call("READONLY");
    assert.equal(
      await replica.xlen(log.keys("s1").events),
      seq,
      "read at once on the replica: WAIT held the acknowledgement until it was there",
    );

    const master = cluster.nodes.find((n) => n.port === owners.master)!;
    await master.stop("SIGKILL");
    const writing = (async () => {
      for (let index = 100; index < 200; index++) await writer.write(line(index));
      return writer.flush();
    })();
    await waitUntil(
      async () => (await replica.info("replication")).includes("role:master"),
      30000,
      "the replica to be promoted",
    );
    await master.start(); // rejoins from its nodes.conf as the promoted master's replica
    const last = await writing;
    assert.equal(writer.failure, undefined);
    assert.equal(last, 200);
    const ids = (await replica.xrange(log.keys("s1").events, "-", "+")).map(([id]) => Number(id.split("-")[1]));
    assert.deepEqual(
      ids,
      Array.from({ length: 200 }, (_, i) => i + 1),
      "every seq once on the promoted master",
    );
    await writer.close();
  },
);
