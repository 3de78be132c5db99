// Shared helpers for projector tests: fixture envelope logs, wrapping raw CLI recordings, loading
// logs into Redis under a random prefix.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { connectRedis, createEventLog, type Envelope, type EventLog, type RedisClient } from "../../src/log/index.ts";

export const root = join(import.meta.dirname, "..", "..");
export const logsDir = join(root, "test", "fixtures", "logs");
export const cliDir = join(root, "test", "fixtures", "cli");

export function fixtureLog(name: string): Envelope[] {
  return readFileSync(join(logsDir, `${name}.jsonl`), "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Envelope);
}

export const fixtureLogNames = (): string[] =>
  readdirSync(logsDir)
    .filter((f) => f.endsWith(".jsonl"))
    .map((f) => f.slice(0, -6))
    .sort();

export const cliFixtureNames = (): string[] =>
  readdirSync(cliDir)
    .filter((f) => f.endsWith(".jsonl"))
    .map((f) => f.slice(0, -6))
    .sort();

/** A raw CLI recording as one attempt of one turn, in envelopes. */
export function wrapCli(name: string, session = "wrap"): Envelope[] {
  const lines = readFileSync(join(cliDir, `${name}.jsonl`), "utf8")
    .split("\n")
    .map((l) => l.replace(/\r$/, ""))
    .filter((l) => l.trim() !== "");
  const out: Envelope[] = [];
  const base = Date.UTC(2025, 0, 1);
  const add = (kind: string, data: unknown): void => {
    out.push({
      v: 1,
      seq: out.length + 1,
      session,
      turn: "t1",
      attempt: 1,
      epoch: 1,
      at: new Date(base + out.length * 10).toISOString(),
      kind,
      data,
    });
  };
  add("attempt.started", { worker: "w", attempt: 1, cwd: "/work" });
  for (const raw of lines) add("cli.line", { raw });
  add("cli.exit", { code: 0, signal: null, durationMs: 10 });
  return out;
}

export const rid = (p = "t"): string => `${p}${randomBytes(5).toString("hex")}`;

export interface RedisCtx {
  redis: RedisClient;
  prefix: string;
  log: EventLog;
  cleanup(): Promise<void>;
}

export function redisCtx(): RedisCtx {
  const redis = connectRedis({ url: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379" });
  const prefix = `${rid("tp")}:`;
  const log = createEventLog({ redis, prefix });
  return {
    redis,
    prefix,
    log,
    async cleanup() {
      let cursor = "0";
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500);
        cursor = next;
        if (keys.length > 0) await redis.del(...keys);
      } while (cursor !== "0");
      redis.disconnect();
    },
  };
}

/** Appends envelopes as stored (same epochs, same times) after whatever the session already has. */
export async function appendEnvelopes(log: EventLog, session: string, envs: readonly Envelope[]): Promise<number> {
  if (envs.length === 0) return (await log.stat(session)).lastSeq;
  const st = await log.stat(session);
  const encoded = envs.map((e) =>
    log.encode(session, e.epoch, { turn: e.turn, attempt: e.attempt, kind: e.kind, data: e.data, at: e.at }),
  );
  const maxEpoch = Math.max(...envs.map((e) => e.epoch));
  const appended = await log.appendEncoded(session, null, encoded, { expectedSeq: st.lastSeq, epochFloor: maxEpoch });
  if (appended.outcome !== "appended") throw new Error(`append failed: ${appended.outcome}`);
  return appended.lastSeq;
}

export async function readAll(log: EventLog, session: string): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const envelope of log.read(session)) out.push(envelope);
  return out;
}

/** JSON round trip: what a stored state looks like. */
export const viaJson = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
