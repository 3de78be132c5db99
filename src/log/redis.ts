// The one place that turns configuration into an ioredis client, standalone or cluster.
// REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES ("host:port,host:port").
import { Cluster, Redis } from "ioredis";
import type { ClusterOptions, RedisOptions } from "ioredis";
import { DEFAULT_REDIS_URL } from "./redis-errors.ts";

export type RedisClient = Redis | Cluster;

export interface ConnectOptions {
  /** Redis URL (default REDIS_URL, else redis://127.0.0.1:6379). */
  url?: string;
  /** Cluster seed nodes; when present (or REDIS_CLUSTER_NODES is set) a Cluster client is returned. */
  clusterNodes?: string | readonly string[];
  /** Extra ioredis options (for a cluster: applied to every node connection). */
  redisOptions?: RedisOptions;
  /** Extra ioredis Cluster options. */
  clusterOptions?: ClusterOptions;
  /** Where REDIS_URL and REDIS_CLUSTER_NODES are read (default process.env). */
  env?: NodeJS.ProcessEnv;
}

export { DEFAULT_REDIS_URL };

function parseNodes(nodes: string | readonly string[]): { host: string; port: number }[] {
  const list = typeof nodes === "string" ? nodes.split(",") : [...nodes];
  return list
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      const at = s.lastIndexOf(":");
      const port = Number(s.slice(at + 1));
      if (at <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) {
        throw new Error(`cluster node ${JSON.stringify(s)} is not host:port; set REDIS_CLUSTER_NODES like 127.0.0.1:7000,127.0.0.1:7001`);
      }
      return { host: s.slice(0, at), port };
    });
}

/** A Redis client for the log and the queue: a Cluster client when cluster nodes are given (or REDIS_CLUSTER_NODES), else one on the URL. */
export function connectRedis(options: ConnectOptions = {}): RedisClient {
  const env = options.env ?? process.env;
  const nodes = options.clusterNodes ?? (env["REDIS_CLUSTER_NODES"] || undefined);
  if (nodes !== undefined) {
    const parsed = parseNodes(nodes);
    if (parsed.length === 0) throw new Error("REDIS_CLUSTER_NODES is empty; list at least one host:port");
    return new Cluster(parsed, {
      ...options.clusterOptions,
      redisOptions: { ...options.redisOptions, ...options.clusterOptions?.redisOptions },
    });
  }
  const url = options.url ?? (env["REDIS_URL"] || DEFAULT_REDIS_URL);
  return new Redis(url, { ...options.redisOptions });
}

export function isCluster(client: RedisClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}
