-- spend.lua: count one model call's cost against its tenant, once, and drop the call's hold.
--
-- KEYS[1]  spend   <prefix>{t:<tenant>}:spend  (hash: bucket number -> micro-USD)
-- KEYS[2]  calls   <prefix>{t:<tenant>}:calls  (sorted set: call id -> when counted, ms)
-- KEYS[3]  holds   <prefix>{t:<tenant>}:holds  (hash: call id -> its hold, see admit.lua)
-- ARGV[1]  call id
-- ARGV[2]  micro-USD (a whole number; 0 only drops the hold)
-- ARGV[3]  bucketMs
-- ARGV[4]  windowMs
--
-- Returns 1 when counted, 0 when the call had been counted before (a hold that lapsed is counted at
-- its full amount by admit.lua, and not again here) or cost nothing.

redis.call('HDEL', KEYS[3], ARGV[1])
if tonumber(ARGV[2]) <= 0 then return 0 end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local keepMs = tonumber(ARGV[4]) + tonumber(ARGV[3])
if redis.call('ZADD', KEYS[2], 'NX', now, ARGV[1]) == 0 then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - keepMs)
redis.call('HINCRBY', KEYS[1], math.floor(now / tonumber(ARGV[3])), ARGV[2])
redis.call('PEXPIRE', KEYS[1], keepMs)
redis.call('PEXPIRE', KEYS[2], keepMs)
return 1
