-- acquire.lua: take the session lease for a turn, if the turn is the head of the pending list.
--
-- KEYS[1]  turns     <prefix>{s:<id>}:turns     (list of pending turn ids)
-- KEYS[2]  lease     <prefix>{s:<id>}:lease     (the lease token, with an expiry)
-- KEYS[3]  cancel    <prefix>{s:<id>}:cancel    (set of turn ids whose cancellation was asked for)
-- KEYS[4]  deferred  <prefix>{s:<id>}:deferred  (set of turn ids whose job waits out a delay)
-- ARGV[1]  turn id
-- ARGV[2]  token  the caller's lease token
-- ARGV[3]  px     lease length in ms
--
-- Returns { status, detail, cancelled } where status is one of
--   "ok"    the turn is the head and the lease is ours now; detail = the turn
--   "wait"  another turn is the head (detail = it); the turn is marked deferred in the same step: its
--           job waits out a delay, and whoever pops the turn before it wakes it
--   "busy"  the lease is held by someone else; detail = the holder's token
--   "gone"  the turn is no longer pending (done or cancelled); detail = the head, or ""
-- and cancelled is 1 when a cancellation was requested for the turn (the caller records it instead
-- of running), else 0.

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
