// Lua scripts registered through ioredis defineCommand: it sends EVALSHA and, on NOSCRIPT (a Redis
// that restarted or ran SCRIPT FLUSH), falls back to EVAL with the source, so scripts survive restarts.
import { readFileSync } from "node:fs";
import type { RedisClient } from "./redis.ts";

const appendLua = readFileSync(new URL("./lua/append.lua", import.meta.url), "utf8");
const beginLua = readFileSync(new URL("./lua/begin.lua", import.meta.url), "utf8");

export type AppendReply = [outcome: string, lastSeq: number, epoch: number];
export type BeginReply = [epoch: number, attempt: number, snap: string];

export interface LogScripts {
  append(keys: readonly [string, string, string], argv: readonly (string | number)[]): Promise<AppendReply>;
  begin(keys: readonly [string, string, string], turn: string): Promise<BeginReply>;
}

const APPEND = "turnstreamLogAppend";
const BEGIN = "turnstreamLogBegin";

type Dynamic = Record<string, (...args: (string | number)[]) => Promise<unknown>>;

export function logScripts(client: RedisClient): LogScripts {
  const dyn = client as unknown as Dynamic;
  if (typeof dyn[APPEND] !== "function") client.defineCommand(APPEND, { numberOfKeys: 3, lua: appendLua });
  if (typeof dyn[BEGIN] !== "function") client.defineCommand(BEGIN, { numberOfKeys: 3, lua: beginLua });
  return {
    append: (keys, argv) => dyn[APPEND]!.call(client, ...keys, ...argv) as Promise<AppendReply>,
    begin: (keys, turn) => dyn[BEGIN]!.call(client, ...keys, turn) as Promise<BeginReply>,
  };
}
