// The one place that turns configuration into an ioredis client: standalone, Sentinel or cluster.
// REDIS_URL (default redis://127.0.0.1:6379; `redis-sentinel://[user:password@]host:port,host:port/
// <primary name>[?db=N]` connects through Sentinel, which names the current primary and, after a
// failover, the promoted one) or REDIS_CLUSTER_NODES ("host:port,host:port").
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

const SENTINEL_SCHEME = "redis-sentinel://";
const SENTINEL_NAME = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * ioredis options for `redis-sentinel://[user:password@]host:port,host:port/<name>[?db=N]`: the
 * sentinels to ask and the primary's name. The password (if any) is the primary's and its replicas';
 * the sentinels are asked without one.
 */
export function sentinelOptions(url: string): RedisOptions {
  const rest = url.slice(SENTINEL_SCHEME.length);
  const at = rest.lastIndexOf("@", rest.indexOf("/") < 0 ? rest.length : rest.indexOf("/"));
  const auth = at < 0 ? "" : rest.slice(0, at);
  const [hosts = "", pathAndQuery = ""] = rest.slice(at + 1).split("/", 2);
  const [name = "", query = ""] = pathAndQuery.split("?", 2);
  if (!SENTINEL_NAME.test(name)) {
    throw new Error(
      `REDIS_URL: a redis-sentinel:// URL ends with /<primary name> (1-64 of A-Z a-z 0-9 . _ -), like redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster`,
    );
  }
  const sentinels = parseNodes(hosts, "REDIS_URL's sentinel");
  if (sentinels.length === 0)
    throw new Error("REDIS_URL: a redis-sentinel:// URL lists at least one sentinel host:port");
  const options: RedisOptions = { sentinels, name };
  if (auth !== "") {
    const colon = auth.indexOf(":");
    const user = decodeURIComponent(colon < 0 ? "" : auth.slice(0, colon));
    if (user !== "") options.username = user;
    options.password = decodeURIComponent(colon < 0 ? auth : auth.slice(colon + 1));
  }
  const db = new URLSearchParams(query).get("db");
  if (db !== null) {
    if (!/^\d{1,2}$/.test(db))
      throw new Error(`REDIS_URL: db=${JSON.stringify(db.slice(0, 10))} is not a database number`);
    options.db = Number(db);
  }
  return options;
}

function parseNodes(nodes: string | readonly string[], what = "cluster node"): { host: string; port: number }[] {
  const list = typeof nodes === "string" ? nodes.split(",") : [...nodes];
  return list
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((entry) => {
      const at = entry.lastIndexOf(":");
      const port = Number(entry.slice(at + 1));
      if (at <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) {
        const example =
          what === "cluster node"
            ? "set REDIS_CLUSTER_NODES like 127.0.0.1:7000,127.0.0.1:7001"
            : "list them like 127.0.0.1:26379,127.0.0.1:26380";
        throw new Error(`${what} ${JSON.stringify(entry.slice(0, 80))} is not host:port; ${example}`);
      }
      return { host: entry.slice(0, at), port };
    });
}

/**
 * A Redis client for the log and the queue: a Cluster client when cluster nodes are given (or REDIS_CLUSTER_NODES),
 * else one on the URL.
 */
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
  if (url.startsWith(SENTINEL_SCHEME)) return new Redis({ ...sentinelOptions(url), ...options.redisOptions });
  return new Redis(url, { ...options.redisOptions });
}

export function isCluster(client: RedisClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}
