// A private redis-server that enforces turnstream's ACL file for a test space's prefixes, so a test can
// act as each role (the worker, an honest operator, an attacker holding only the operator role) and
// Redis itself says what each may write.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newAclPasswords, redisAclFile, type AclRole } from "../../src/decisions/index.ts";
import { connectRedis, type RedisClient } from "../../src/log/index.ts";

export interface AclRedis {
  /** A redis:// URL that logs in as `role`. */
  url(role: AclRole): string;
  /** A client logged in as `role` (disconnected by close()). */
  client(role: AclRole): RedisClient;
  /** Disconnects the clients, kills the server and removes its files. */
  close(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A redis-server on a free loopback port whose users are those of `aclFile`. */
export async function startAclServer(aclFile: string): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  return { port, child: await startServer(aclFile, port) };
}

async function startServer(aclFile: string, port: number): Promise<ChildProcess> {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--aclfile", aclFile, "--save", "", "--appendonly", "no"],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      if (out.includes("Ready to accept connections")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`redis-server exited (${code}): ${out.slice(-500)}`)));
  });
  return child;
}

/** Starts a redis-server whose users are exactly `turnstream acl`'s roles for these prefixes. */
export async function startAclRedis(prefixes: { logPrefix: string; queuePrefix: string }): Promise<AclRedis> {
  const dir = mkdtempSync(join(tmpdir(), "ts-acl-attack-"));
  const passwords = newAclPasswords();
  const aclFile = join(dir, "users.acl");
  writeFileSync(aclFile, redisAclFile({ ...prefixes, passwords }), { mode: 0o600 });
  const { port, child } = await startAclServer(aclFile);
  const clients: RedisClient[] = [];
  const url = (role: AclRole): string => `redis://${role}:${passwords[role]}@127.0.0.1:${port}`;
  return {
    url,
    client(role) {
      const client = connectRedis({ url: url(role), redisOptions: { maxRetriesPerRequest: 2 } });
      clients.push(client);
      return client;
    },
    async close() {
      for (const client of clients) client.disconnect();
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
