// The ordering/lease scripts. Each touches only one session's keys (one hash tag), so each is atomic
// on a single Redis and on a cluster. Registered with defineCommand (EVALSHA with EVAL fallback, so
// they survive a Redis restart).
import type { RedisClient } from "../log/index.ts";

// KEYS turns, registered, conf · ARGV turn, nowMs, onLostSession ("" = leave) → 1 new, 0 known
const REGISTER = `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSETNX', KEYS[3], 'onLostSession', ARGV[3]) end
return 1
`;

// KEYS turns, lease, cancel · ARGV turn, token, px → {status, detail, cancelled (1/0)}
// ok: this turn is the head and the lease is ours; wait: another turn is the head; busy: the lease
// is held by someone else (detail = holder); gone: the turn is no longer pending (done or cancelled).
// cancelled: a cancellation was requested for the turn (the caller records it instead of running).
const ACQUIRE = `
local c = redis.call('SISMEMBER', KEYS[3], ARGV[1])
local head = redis.call('LINDEX', KEYS[1], 0)
if not head then return {'gone', '', c} end
if head ~= ARGV[1] then
  if not redis.call('LPOS', KEYS[1], ARGV[1]) then return {'gone', head, c} end
  return {'wait', head, c}
end
local cur = redis.call('GET', KEYS[2])
if cur and cur ~= ARGV[2] then return {'busy', cur, c} end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {'ok', head, c}
`;

// KEYS lease, cancel · ARGV token, px, turn → ok | lost | cancelled
const RENEW = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 'lost' end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('SISMEMBER', KEYS[2], ARGV[3]) == 1 then return 'cancelled' end
return 'ok'
`;

// KEYS turns, lease, cancel · ARGV turn, token → the next head ('' when none), or false when the
// lease belongs to someone else (then nothing is popped: another attempt owns the turn now).
const FINISH = `
local cur = redis.call('GET', KEYS[2])
if cur and cur ~= ARGV[2] then return false end
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then redis.call('LPOP', KEYS[1]) end
if cur then redis.call('DEL', KEYS[2]) end
redis.call('SREM', KEYS[3], ARGV[1])
return redis.call('LINDEX', KEYS[1], 0) or ''
`;

// KEYS lease · ARGV token → 1 released, 0 not ours
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
`;

// KEYS turns, cancel · ARGV turn → the next head ('' when none): drops a turn that will never run.
const DROP = `
redis.call('LREM', KEYS[1], 1, ARGV[1])
redis.call('SREM', KEYS[2], ARGV[1])
return redis.call('LINDEX', KEYS[1], 0) or ''
`;

const defs = {
  turnstreamQueueRegister: { keys: 3, lua: REGISTER },
  turnstreamQueueAcquire2: { keys: 3, lua: ACQUIRE },
  turnstreamQueueRenew: { keys: 2, lua: RENEW },
  turnstreamQueueFinish: { keys: 3, lua: FINISH },
  turnstreamQueueRelease: { keys: 1, lua: RELEASE },
  turnstreamQueueDrop: { keys: 2, lua: DROP },
} as const;

type Dynamic = Record<string, (...args: (string | number)[]) => Promise<unknown>>;

export interface OrderScripts {
  register(keys: [string, string, string], turn: string, nowMs: number, onLostSession: string): Promise<number>;
  acquire(keys: [string, string, string], turn: string, token: string, px: number): Promise<[string, string, number]>;
  renew(keys: [string, string], token: string, px: number, turn: string): Promise<string>;
  finish(keys: [string, string, string], turn: string, token: string): Promise<string | null>;
  release(keys: [string], token: string): Promise<number>;
  drop(keys: [string, string], turn: string): Promise<string>;
}

export function orderScripts(client: RedisClient): OrderScripts {
  const dyn = client as unknown as Dynamic;
  for (const [name, d] of Object.entries(defs)) {
    if (typeof dyn[name] !== "function") client.defineCommand(name, { numberOfKeys: d.keys, lua: d.lua });
  }
  const call = <T>(name: keyof typeof defs, ...args: (string | number)[]): Promise<T> => dyn[name]!.call(client, ...args) as Promise<T>;
  return {
    register: (k, turn, now, ols) => call("turnstreamQueueRegister", ...k, turn, now, ols),
    acquire: (k, turn, token, px) => call("turnstreamQueueAcquire2", ...k, turn, token, px),
    renew: (k, token, px, turn) => call("turnstreamQueueRenew", ...k, token, px, turn),
    finish: (k, turn, token) => call("turnstreamQueueFinish", ...k, turn, token),
    release: (k, token) => call("turnstreamQueueRelease", ...k, token),
    drop: (k, turn) => call("turnstreamQueueDrop", ...k, turn),
  };
}
