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

// KEYS turns, lease, cancel, deferred · ARGV turn, token, px → {status, detail, cancelled (1/0)}
// ok: this turn is the head and the lease is ours; wait: another turn is the head (the turn is marked
// deferred in the same step: its job waits out a delay, and whoever pops the turn before it wakes it);
// busy: the lease is held by someone else (detail = holder); gone: the turn is no longer pending
// (done or cancelled). cancelled: a cancellation was requested for the turn (the caller records it
// instead of running).
const ACQUIRE = `
local c = redis.call('SISMEMBER', KEYS[3], ARGV[1])
local head = redis.call('LINDEX', KEYS[1], 0)
if not head then return {'gone', '', c} end
if head ~= ARGV[1] then
  if not redis.call('LPOS', KEYS[1], ARGV[1]) then return {'gone', head, c} end
  redis.call('SADD', KEYS[4], ARGV[1])
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

// The next head after a pop, {turn ('' when none), 1 when its job was deferred (unmarked now: the
// caller wakes it) else 0}. KEYS[i] is the deferred set.
const NEXT_HEAD = (i: number): string => `
local nxt = redis.call('LINDEX', KEYS[1], 0)
if not nxt then return {'', 0} end
return {nxt, redis.call('SREM', KEYS[${i}], nxt)}
`;

// KEYS turns, lease, cancel, deferred · ARGV turn, token → the next head (NEXT_HEAD), or false when
// the lease belongs to someone else (then nothing is popped: another attempt owns the turn now).
const FINISH = `
local cur = redis.call('GET', KEYS[2])
if cur and cur ~= ARGV[2] then return false end
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then redis.call('LPOP', KEYS[1]) end
if cur then redis.call('DEL', KEYS[2]) end
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
${NEXT_HEAD(4)}`;

// KEYS lease · ARGV token → 1 released, 0 not ours
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
`;

// KEYS turns, cancel, deferred · ARGV turn → the next head (NEXT_HEAD): drops a turn that will never run.
const DROP = `
redis.call('LREM', KEYS[1], 1, ARGV[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
${NEXT_HEAD(3)}`;

const defs = {
  turnstreamQueueRegister: { keys: 3, lua: REGISTER },
  turnstreamQueueAcquire3: { keys: 4, lua: ACQUIRE },
  turnstreamQueueRenew: { keys: 2, lua: RENEW },
  turnstreamQueueFinish2: { keys: 4, lua: FINISH },
  turnstreamQueueRelease: { keys: 1, lua: RELEASE },
  turnstreamQueueDrop2: { keys: 3, lua: DROP },
} as const;

type Dynamic = Record<string, (...args: (string | number)[]) => Promise<unknown>>;

export interface OrderScripts {
  register(keys: [string, string, string], turn: string, nowMs: number, onLostSession: string): Promise<number>;
  acquire(keys: [string, string, string, string], turn: string, token: string, px: number): Promise<[string, string, number]>;
  renew(keys: [string, string], token: string, px: number, turn: string): Promise<string>;
  finish(keys: [string, string, string, string], turn: string, token: string): Promise<[string, number] | null>;
  release(keys: [string], token: string): Promise<number>;
  drop(keys: [string, string, string], turn: string): Promise<[string, number]>;
}

export function orderScripts(client: RedisClient): OrderScripts {
  const dyn = client as unknown as Dynamic;
  for (const [name, d] of Object.entries(defs)) {
    if (typeof dyn[name] !== "function") client.defineCommand(name, { numberOfKeys: d.keys, lua: d.lua });
  }
  const call = <T>(name: keyof typeof defs, ...args: (string | number)[]): Promise<T> => dyn[name]!.call(client, ...args) as Promise<T>;
  return {
    register: (k, turn, now, ols) => call("turnstreamQueueRegister", ...k, turn, now, ols),
    acquire: (k, turn, token, px) => call("turnstreamQueueAcquire3", ...k, turn, token, px),
    renew: (k, token, px, turn) => call("turnstreamQueueRenew", ...k, token, px, turn),
    finish: (k, turn, token) => call("turnstreamQueueFinish2", ...k, turn, token),
    release: (k, token) => call("turnstreamQueueRelease", ...k, token),
    drop: (k, turn) => call("turnstreamQueueDrop2", ...k, turn),
  };
}
