// When an append counts as done (TURNSTREAM_DURABILITY). `memory`: once the primary applied it (Redis's
// own reply; a failover to a replica that missed it loses it, which the rollback check then detects).
// `replicas:N`: once WAIT says N replicas hold it, so a failover to one of them keeps it. `fsync`: once
// the primary's AOF is on disk (WAITAOF on Redis ≥ 7.2; before that, only a server that fsyncs every
// write before replying, `appendfsync always`, is accepted), so a restart from the AOF keeps it.
// WAIT and WAITAOF count the writes made on the connection they are sent on: they go on the same
// client as the append script, after it.
import { TurnstreamError } from "../kernel/index.ts";
import type { Cluster, Redis } from "ioredis";
import type { RedisClient } from "./redis.ts";
import { isCluster } from "./redis.ts";
import { redisAddress } from "./redis-errors.ts";

export type Durability =
  | { level: "memory" }
  | { level: "replicas"; replicas: number; timeoutMs: number; tries: number }
  | { level: "fsync"; timeoutMs: number; tries: number };

export const MEMORY: Durability = { level: "memory" };
export const DEFAULT_DURABILITY_TIMEOUT_MS = 1000;
// 10 × 1 s: long enough for a Sentinel failover to bring a replica back under the promoted primary.
export const DEFAULT_DURABILITY_TRIES = 10;

const FORM = /^(memory|fsync|replicas:([1-9][0-9]?))$/;

/** An append Redis applied but could not confirm at the durability level asked for. */
export class DurabilityError extends TurnstreamError {
  /**
   * `replicas_timeout`: fewer than N replicas acknowledged; `fsync_timeout`: the AOF was not fsynced in time;
   * `unsupported`: the server cannot give the level.
   */
  readonly problem: "replicas_timeout" | "fsync_timeout" | "unsupported";
  constructor(problem: DurabilityError["problem"], message: string) {
    super(message, { code: "log_not_durable" });
    this.problem = problem;
  }
}

/** Reads `memory`, `replicas:N` (1-99) or `fsync`; anything else is refused naming the variable. */
export function parseDurability(text: string | undefined, variable = "TURNSTREAM_DURABILITY"): Durability {
  if (text === undefined || text === "") return MEMORY;
  const form = FORM.exec(text);
  if (form === null) {
    throw new Error(
      `${variable}=${JSON.stringify(text.slice(0, 40))} is not a durability level: use memory (default), replicas:N (N replicas hold each batch) or fsync`,
    );
  }
  if (form[1] === "memory") return MEMORY;
  if (form[1] === "fsync")
    return { level: "fsync", timeoutMs: DEFAULT_DURABILITY_TIMEOUT_MS, tries: DEFAULT_DURABILITY_TRIES };
  return {
    level: "replicas",
    replicas: Number(form[2]),
    timeoutMs: DEFAULT_DURABILITY_TIMEOUT_MS,
    tries: DEFAULT_DURABILITY_TRIES,
  };
}

export function describeDurability(durability: Durability): string {
  return durability.level === "replicas" ? `replicas:${durability.replicas}` : durability.level;
}

/** The server's version as [major, minor]. */
async function serverVersion(node: Redis): Promise<[number, number]> {
  const info = await node.info("server");
  const version = /redis_version:(\d+)\.(\d+)/.exec(info);
  return version === null ? [0, 0] : [Number(version[1]), Number(version[2])];
}

function primaries(client: RedisClient): Redis[] {
  return isCluster(client) ? (client as Cluster).nodes("master") : [client as Redis];
}

async function configValue(node: Redis, name: string): Promise<string> {
  const reply = (await node.config("GET", name)) as string[];
  return String(reply[1] ?? "");
}

/**
 * Whether the server can give the level; resolves with how `fsync` is confirmed (`waitaof` on ≥ 7.2,
 * `always` when the server fsyncs every write before replying). Refuses, naming the setting, a server
 * older than 7.2 without `appendonly yes` and `appendfsync always`.
 */
export async function checkDurability(
  client: RedisClient,
  durability: Durability,
): Promise<"waitaof" | "always" | undefined> {
  if (durability.level !== "fsync") return undefined;
  const nodes = primaries(client);
  let mode: "waitaof" | "always" = "waitaof";
  for (const node of nodes) {
    const [major, minor] = await serverVersion(node);
    if (major > 7 || (major === 7 && minor >= 2)) continue;
    const [aof, fsync] = await Promise.all([configValue(node, "appendonly"), configValue(node, "appendfsync")]);
    if (aof !== "yes" || fsync !== "always") {
      throw new DurabilityError(
        "unsupported",
        `TURNSTREAM_DURABILITY=fsync: Redis ${major}.${minor} at ${redisAddress(node)} has no WAITAOF ` +
          `(7.2+), and its appendonly is ${JSON.stringify(aof)}, appendfsync ${JSON.stringify(fsync)}; ` +
          `set appendonly yes and appendfsync always on it, upgrade to Redis 7.2+, or choose another level`,
      );
    }
    mode = "always";
  }
  return mode;
}

/** How many replicas (WAIT) or local AOFs (WAITAOF) confirmed the connection's writes, the least over primaries. */
async function confirmed(client: RedisClient, durability: Exclude<Durability, { level: "memory" }>): Promise<number> {
  const counts = await Promise.all(
    primaries(client).map(async (node) => {
      if (durability.level === "replicas")
        return Number(await node.call("WAIT", durability.replicas, durability.timeoutMs));
      const [local] = (await node.call("WAITAOF", 1, 0, durability.timeoutMs)) as [number, number];
      return Number(local);
    }),
  );
  return Math.min(...counts);
}

/**
 * Waits until the writes this client made are held at the level: WAIT N (or WAITAOF 1 0) up to
 * `tries` times, each for `timeoutMs`; then DurabilityError. On a cluster every primary's connection
 * is asked (the append went to one of them; the others have nothing pending and answer at once).
 */
export async function awaitDurable(
  client: RedisClient,
  durability: Durability,
  fsyncMode: "waitaof" | "always" | undefined,
): Promise<void> {
  if (durability.level === "memory" || (durability.level === "fsync" && fsyncMode === "always")) return;
  const needed = durability.level === "replicas" ? durability.replicas : 1;
  let got = 0;
  for (let tryNo = 1; tryNo <= durability.tries; tryNo++) {
    got = await confirmed(client, durability);
    if (got >= needed) return;
  }
  const waited = durability.tries * durability.timeoutMs;
  if (durability.level === "replicas") {
    throw new DurabilityError(
      "replicas_timeout",
      `TURNSTREAM_DURABILITY=replicas:${durability.replicas}: only ${got} replica(s) confirmed the append within ${waited} ms; ` +
        `check that the primary has ${durability.replicas} connected, caught-up replica(s) (INFO replication) or lower N`,
    );
  }
  throw new DurabilityError(
    "fsync_timeout",
    `TURNSTREAM_DURABILITY=fsync: the AOF was not fsynced within ${waited} ms; check the primary's disk and appendonly setting`,
  );
}
