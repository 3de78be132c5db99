// Lua scripts registered through ioredis defineCommand: it sends EVALSHA and, on NOSCRIPT (a Redis
// that restarted or ran SCRIPT FLUSH), falls back to EVAL with the source, so scripts survive restarts.
// Each script lives in a .lua file beside the module that runs it, with a header naming its KEYS,
// ARGV and replies; scripts/build.ts copies those files next to the built JavaScript.
import { readFileSync } from "node:fs";
import type { RedisClient } from "./redis.ts";

/** A Lua script and the command name it is registered under. */
export interface LuaScript {
  readonly name: string;
  readonly numberOfKeys: number;
  readonly lua: string;
}

/** Reads a script file (resolve `file` against the caller's `import.meta.url`). */
export function luaScript(name: string, numberOfKeys: number, file: URL): LuaScript {
  return { name, numberOfKeys, lua: readFileSync(file, "utf8") };
}

type Arg = string | number;
type DefinedCommand = (...args: (Arg | readonly Arg[])[]) => Promise<unknown>;

/** The method ioredis's defineCommand added to the client under `name`, if it has one. */
function definedCommand(client: RedisClient, name: string): DefinedCommand | undefined {
  const method: unknown = Reflect.get(client, name);
  return typeof method === "function" ? (method as DefinedCommand) : undefined;
}

/** Registers the script on this client (once per client) and returns a call taking its keys and its argv. */
export function scriptCommand<T>(
  client: RedisClient,
  script: LuaScript,
): (keys: readonly Arg[], argv: readonly Arg[]) => Promise<T> {
  if (definedCommand(client, script.name) === undefined)
    client.defineCommand(script.name, { numberOfKeys: script.numberOfKeys, lua: script.lua });
  const command = definedCommand(client, script.name);
  if (command === undefined) throw new Error(`the Redis client did not define the command ${script.name}`);
  // argv goes as one array, which ioredis flattens into the command: spread into call arguments, a
  // projection commit's hundreds of thousands of fields would overflow the stack.
  return (keys, argv) => command.call(client, ...keys, argv) as Promise<T>;
}

const APPEND = luaScript("turnstreamLogAppend", 3, new URL("./lua/append.lua", import.meta.url));
const BEGIN = luaScript("turnstreamLogBegin", 3, new URL("./lua/begin.lua", import.meta.url));

export type AppendReply = [outcome: string, lastSeq: number, epoch: number];
export type BeginReply = [epoch: number, attempt: number, snap: string, seq: number];

export interface LogScripts {
  append(keys: readonly [string, string, string], argv: readonly (string | number)[]): Promise<AppendReply>;
  begin(keys: readonly [string, string, string], turn: string): Promise<BeginReply>;
}

export function logScripts(client: RedisClient): LogScripts {
  const append = scriptCommand<AppendReply>(client, APPEND);
  const begin = scriptCommand<BeginReply>(client, BEGIN);
  return {
    append: (keys, argv) => append(keys, argv),
    begin: (keys, turn) => begin(keys, [turn]),
  };
}
