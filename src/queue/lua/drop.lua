-- drop.lua: remove a turn that will never run (cancelled while queued, orphaned) and name the next head.
--
-- KEYS[1]  turns     <prefix>{s:<id>}:turns
-- KEYS[2]  cancel    <prefix>{s:<id>}:cancel
-- KEYS[3]  deferred  <prefix>{s:<id>}:deferred
-- ARGV[1]  turn id
--
-- Returns { next, deferred }: next is the head after the drop ("" when none), deferred is 1 when its
-- job was waiting out a delay (unmarked now: the caller wakes it), else 0.

redis.call('LREM', KEYS[1], 1, ARGV[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
-- the next head (as in finish.lua)
local nxt = redis.call('LINDEX', KEYS[1], 0)
if not nxt then return {'', 0} end
return {nxt, redis.call('SREM', KEYS[3], nxt)}
