// Starts a local Redis Cluster of three masters (no replicas, unless asked) on free loopback ports, each node in
// its own temp dir, slots assigned with `redis-cli --cluster create`. Ready once every node reports
// cluster_state:ok and agrees on all slots.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort, startRedisServer, type RedisServer } from "./redis-server.ts";

const run = promisify(execFile);

export interface RedisCluster {
  readonly nodes: readonly RedisServer[];
  /** "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3", the REDIS_CLUSTER_NODES form. */
  readonly nodeList: string;
  dispose(): Promise<void>;
}

async function clusterOk(port: number, known: number): Promise<boolean> {
  const { stdout } = await run("redis-cli", ["-h", "127.0.0.1", "-p", String(port), "cluster", "info"]);
  return (
    stdout.includes("cluster_state:ok") &&
    stdout.includes("cluster_slots_ok:16384") &&
    stdout.includes(`cluster_known_nodes:${known}`)
  );
}

export interface RedisClusterOptions {
  masters?: number;
  /** Replicas per master (default 0): `--cluster-replicas`. */
  replicas?: number;
  /** cluster-node-timeout, ms (default 5000): how soon a dead master's replica is promoted. */
  nodeTimeoutMs?: number;
  readyTimeoutMs?: number;
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const replicas = options.replicas ?? 0;
  const count = (options.masters ?? 3) * (1 + replicas);
  const root = mkdtempSync(join(tmpdir(), "turnstream-cluster-"));
  const nodes: RedisServer[] = [];
  try {
    for (let index = 0; index < count; index++) {
      const port = await freePort(10000);
      const dir = join(root, `n${index}`);
      await run("mkdir", ["-p", dir]);
      nodes.push(
        await startRedisServer({
          port,
          dir,
          args: [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            String(options.nodeTimeoutMs ?? 5000),
          ],
        }),
      );
    }
    const addrs = nodes.map((n) => `127.0.0.1:${n.port}`);
    await run("redis-cli", ["--cluster", "create", ...addrs, "--cluster-replicas", String(replicas), "--cluster-yes"]);
    const deadline = Date.now() + (options.readyTimeoutMs ?? 20000);
    // Gossip converges on its own schedule; poll each node's view with a bounded deadline.
    for (;;) {
      const ok = await Promise.all(nodes.map((n) => clusterOk(n.port, count)));
      if (ok.every(Boolean)) break;
      if (Date.now() > deadline) throw new Error("redis cluster did not reach cluster_state:ok in time");
      await new Promise((r) => setTimeout(r, 100));
    }
    return {
      nodes,
      nodeList: addrs.join(","),
      async dispose() {
        await Promise.all(nodes.map((n) => n.dispose()));
        rmSync(root, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await Promise.all(nodes.map((n) => n.dispose()));
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
}
