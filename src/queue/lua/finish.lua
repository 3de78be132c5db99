-- finish.lua: a turn has ended: pop it from the head, release the lease, and name the next head.
--
-- KEYS[1]  turns     <prefix>{s:<id>}:turns
-- KEYS[2]  lease     <prefix>{s:<id>}:lease
-- KEYS[3]  cancel    <prefix>{s:<id>}:cancel
-- KEYS[4]  deferred  <prefix>{s:<id>}:deferred
-- ARGV[1]  turn id
-- ARGV[2]  token  the caller's lease token
--
-- Returns false when the lease belongs to someone else (nothing is popped: another attempt owns the
-- turn now); otherwise { next, deferred }: next is the new head ("" when none), deferred is 1 when
-- its job was waiting out a delay (unmarked now: the caller wakes it), else 0.

local cur = redis.call('GET', KEYS[2])
if cur and cur ~= ARGV[2] then return false end
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then redis.call('LPOP', KEYS[1]) end
if cur then redis.call('DEL', KEYS[2]) end
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
-- the next head (as in drop.lua)
local nxt = redis.call('LINDEX', KEYS[1], 0)
if not nxt then return {'', 0} end
return {nxt, redis.call('SREM', KEYS[4], nxt)}
