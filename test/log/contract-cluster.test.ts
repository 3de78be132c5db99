// The same contract against a real three-master Redis Cluster started for this file.
import { Cluster } from "ioredis";
import { connectRedis } from "../../src/log/index.ts";
import { startRedisCluster, type RedisCluster } from "../support/redis-cluster.ts";
import { logContract } from "./contract.ts";

let cluster: RedisCluster | undefined;

logContract(
  "cluster",
  async () => {
    cluster = await startRedisCluster();
    const client = connectRedis({ clusterNodes: cluster.nodeList, env: {} });
    if (!(client instanceof Cluster)) throw new Error("expected a cluster client");
    await new Promise<void>((resolve, reject) => {
      client.once("ready", resolve);
      client.once("error", reject);
    });
    return client;
  },
  async () => {
    await cluster?.dispose();
  },
);
