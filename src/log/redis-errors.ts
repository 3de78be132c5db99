// The one place that turns what ioredis reports (MaxRetriesPerRequestError, ECONNREFUSED, NOAUTH,
// READONLY, LOADING, CLUSTERDOWN…) into a message a person can act on: which Redis (its address,
// never its password), what failed, and what to check. Commands print it; workers log it. No runtime
// import of ioredis here: the command line's error path loads this without it.
import { TurnstreamError } from "../kernel/index.ts";
import type { Cluster } from "ioredis";
import type { RedisClient } from "./redis.ts";

export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/** What is wrong with the Redis a client uses, as far as its errors tell. */
export type RedisProblem = "unreachable" | "auth" | "read_only" | "loading" | "cluster_down";

// `at` is the Redis and, when known, what was being done: "redis://host:6379 (while waiting for …)".
const CHECK: Readonly<Record<RedisProblem, (at: string) => string>> = {
  unreachable: (at) =>
    `cannot reach Redis at ${at}: is it running and reachable from here? start one (docker compose up -d ` +
    `redis, or redis-server --port 6379) or point REDIS_URL / REDIS_CLUSTER_NODES at yours`,
  auth: (at) =>
    `Redis at ${at} refused this client's credentials: check the user and password in REDIS_URL ` +
    `(redis://user:password@host:port) against the server's users (ACL LIST, deploy/redis-users.acl)`,
  read_only: (at) =>
    `Redis at ${at} is a read-only replica, so it refused a write: after a failover the address may still ` +
    `lead to the old primary; point REDIS_URL at the current primary`,
  loading: (at) =>
    `Redis at ${at} is still loading its data after a restart: retry once it is loaded (INFO persistence shows loading:0)`,
  cluster_down: (at) =>
    `the Redis Cluster at ${at} cannot serve (CLUSTERDOWN: a hash slot has no master): check its nodes with ` +
    `redis-cli --cluster check`,
};

/** Redis did not hold up; the message names the Redis, what failed and what to check. */
export class RedisUnavailableError extends TurnstreamError {
  /** The Redis, without credentials. */
  readonly url: string;
  readonly problem: RedisProblem;
  /** `code`, for loggers that keep an error's code: the underlying error's (ECONNREFUSED…), else the problem. */
  constructor(url: string, problem: RedisProblem = "unreachable", doing?: string, cause?: unknown) {
    const causeCode = (cause as { code?: unknown } | undefined)?.code;
    super(CHECK[problem](doing === undefined ? url : `${url} (while ${doing})`), {
      code: typeof causeCode === "string" ? causeCode : problem,
      retryable: true,
      cause,
    });
    this.url = url;
    this.problem = problem;
  }
}

const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "EAI_AGAIN",
]);
const UNREACHABLE_MESSAGES = [
  "Connection is closed",
  "None of startup nodes is available",
  "Stream isn't writeable",
  "Failed to refresh slots cache",
];
const REPLY_PREFIXES: readonly [string, RedisProblem][] = [
  ["NOAUTH", "auth"],
  ["WRONGPASS", "auth"],
  ["READONLY", "read_only"],
  ["LOADING", "loading"],
  ["CLUSTERDOWN", "cluster_down"],
];

/** Which problem an error from ioredis (or a connection under it) shows, if it is one of Redis being unavailable. */
export function redisProblemOf(err: unknown): RedisProblem | undefined {
  if (err instanceof RedisUnavailableError) return err.problem;
  if (err === null || typeof err !== "object") return undefined;
  const { name, message, code } = err as { name?: unknown; message?: unknown; code?: unknown };
  const text = typeof message === "string" ? message : "";
  if (name === "MaxRetriesPerRequestError" || name === "ClusterAllFailedError") return "unreachable";
  if (typeof code === "string" && UNREACHABLE_CODES.has(code)) return "unreachable";
  if (UNREACHABLE_MESSAGES.some((m) => text.includes(m))) return "unreachable";
  for (const [prefix, problem] of REPLY_PREFIXES) if (text.startsWith(prefix)) return problem;
  return undefined;
}

/**
 * `err` as a RedisUnavailableError naming `url` and what was being done, when it shows Redis being
 * unavailable; otherwise `err` itself (as an Error).
 */
export function explainRedisError(err: unknown, url: string, doing?: string): Error {
  if (err instanceof RedisUnavailableError) return err;
  const problem = redisProblemOf(err);
  if (problem !== undefined) return new RedisUnavailableError(url, problem, doing, err);
  return err instanceof Error ? err : new Error(String(err));
}

/** The Redis that REDIS_URL / REDIS_CLUSTER_NODES name, without user or password. */
export function redisUrlForDisplay(env: NodeJS.ProcessEnv = process.env): string {
  const nodes = env["REDIS_CLUSTER_NODES"];
  if (nodes) return `cluster ${nodes}`;
  return withoutCredentials(env["REDIS_URL"] || DEFAULT_REDIS_URL);
}

function withoutCredentials(raw: string): string {
  const sentinel = "redis-sentinel://";
  if (raw.startsWith(sentinel)) {
    // Several hosts are not a URL's authority: drop what comes before the last @ of the host part.
    const rest = raw.slice(sentinel.length);
    const slash = rest.indexOf("/");
    const hosts = slash < 0 ? rest : rest.slice(0, slash);
    return `${sentinel}${hosts.slice(hosts.lastIndexOf("@") + 1)}${slash < 0 ? "" : rest.slice(slash).split("?")[0]}`;
  }
  try {
    const url = new URL(raw);
    url.username = "";
    url.password = "";
    return url.toString();
  } catch {
    return "(REDIS_URL is not a URL)";
  }
}

/** The Redis a client talks to, without credentials: what its errors are reported against. */
export function redisAddress(client: RedisClient): string {
  if ((client as { isCluster?: boolean }).isCluster === true) {
    const nodes = (client as Cluster).nodes().map((n) => `${n.options.host ?? "?"}:${n.options.port ?? "?"}`);
    return nodes.length === 0 ? "a Redis Cluster" : `cluster ${nodes.join(",")}`;
  }
  const { host, port, db, tls, sentinels, name } = (client as Exclude<RedisClient, Cluster>).options;
  if (sentinels !== undefined && sentinels !== null && sentinels.length > 0) {
    return `redis-sentinel://${sentinels.map((s) => `${s.host ?? "127.0.0.1"}:${s.port ?? 26379}`).join(",")}/${name ?? "mymaster"}`;
  }
  return `${tls === undefined ? "redis" : "rediss"}://${host ?? "127.0.0.1"}:${port ?? 6379}${db ? `/${db}` : ""}`;
}
