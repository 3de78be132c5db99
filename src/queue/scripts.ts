// The ordering/lease scripts (src/queue/lua/*.lua; each file's header names its KEYS, ARGV and
// replies). Each touches only one session's keys (one hash tag), so each is atomic on a single Redis
// and on a cluster.
import type { RedisClient } from "../log/index.ts";
import { luaScript, scriptCommand } from "../log/index.ts";

const REGISTER = luaScript("turnstreamQueueRegister4", 4, new URL("./lua/register.lua", import.meta.url));
const ACQUIRE = luaScript("turnstreamQueueAcquire3", 4, new URL("./lua/acquire.lua", import.meta.url));
const RENEW = luaScript("turnstreamQueueRenew", 2, new URL("./lua/renew.lua", import.meta.url));
const FINISH = luaScript("turnstreamQueueFinish2", 4, new URL("./lua/finish.lua", import.meta.url));
const RELEASE = luaScript("turnstreamQueueRelease", 1, new URL("./lua/release.lua", import.meta.url));
const DROP = luaScript("turnstreamQueueDrop2", 3, new URL("./lua/drop.lua", import.meta.url));

export interface OrderScripts {
  register(
    keys: [string, string, string, string],
    turn: string,
    nowMs: number,
    onLostSession: string,
    warm: string,
    expectSession: string,
    tenant: string,
  ): Promise<[number, string, string]>;
  acquire(
    keys: [string, string, string, string],
    turn: string,
    token: string,
    px: number,
  ): Promise<[string, string, number]>;
  renew(keys: [string, string], token: string, px: number, turn: string): Promise<string>;
  finish(keys: [string, string, string, string], turn: string, token: string): Promise<[string, number] | null>;
  release(keys: [string], token: string): Promise<number>;
  drop(keys: [string, string, string], turn: string): Promise<[string, number]>;
}

export function orderScripts(client: RedisClient): OrderScripts {
  const register = scriptCommand<[number, string, string]>(client, REGISTER);
  const acquire = scriptCommand<[string, string, number]>(client, ACQUIRE);
  const renew = scriptCommand<string>(client, RENEW);
  const finish = scriptCommand<[string, number] | null>(client, FINISH);
  const release = scriptCommand<number>(client, RELEASE);
  const drop = scriptCommand<[string, number]>(client, DROP);
  return {
    register: (k, turn, now, onLostSession, warm, expectSession, tenant) =>
      register(k, [turn, now, onLostSession, warm, expectSession, tenant]),
    acquire: (k, turn, token, px) => acquire(k, [turn, token, px]),
    renew: (k, token, px, turn) => renew(k, [token, px, turn]),
    finish: (k, turn, token) => finish(k, [turn, token]),
    release: (k, token) => release(k, [token]),
    drop: (k, turn) => drop(k, [turn]),
  };
}
