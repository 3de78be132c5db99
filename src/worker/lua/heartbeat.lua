-- heartbeat.lua: write a worker's registry entry, unless another process holds the same instance id.
--
-- KEYS[1]  entry  <prefix>{workers}:w:<instance id>   hash
-- KEYS[2]  live   <prefix>{workers}:live              sorted set: instance id -> expiry (ms)
-- ARGV[1]  boot   the process's random boot token
-- ARGV[2]  ttl    milliseconds the entry lives without another beat
-- ARGV[3]  now    the caller's clock (ms), for the index's expiry scores
-- ARGV[4]  id     the instance id (the index's member)
-- ARGV[5…] field, value pairs of the entry (including `boot`)
--
-- Returns {'ok'} when the entry is the caller's (written or refreshed), or {'taken', worker, host, pid}
-- naming the live entry of another boot token, which is left as it is: the first holder keeps the id
-- until it stops beating, so two processes never both count as the instance.

local cur = redis.call('HGET', KEYS[1], 'boot')
if cur and cur ~= ARGV[1] then
  local other = redis.call('HMGET', KEYS[1], 'worker', 'host', 'pid')
  return {'taken', other[1] or '', other[2] or '', other[3] or ''}
end
local ttl = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
-- Entries that expired without a clean close leave their index member behind; drop those now.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl)
return {'ok'}
