-- renew.lua: extend the session lease while an attempt runs, and report a requested cancellation.
--
-- KEYS[1]  lease   <prefix>{s:<id>}:lease
-- KEYS[2]  cancel  <prefix>{s:<id>}:cancel  (set of turn ids whose cancellation was asked for)
-- ARGV[1]  token  the caller's lease token
-- ARGV[2]  px     lease length in ms
-- ARGV[3]  turn id
--
-- Returns one of
--   "ok"         the lease is extended
--   "lost"       the lease is not the caller's (someone else holds it, or it expired): nothing changed
--   "cancelled"  the lease is extended, and a cancellation was requested for the turn

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 'lost' end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('SISMEMBER', KEYS[2], ARGV[3]) == 1 then return 'cancelled' end
return 'ok'
