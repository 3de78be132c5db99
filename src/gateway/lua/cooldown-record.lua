-- cooldown-record.lua: the upstream answered 429, 529 or 503 for this credential; cool it fleet-wide.
--
-- KEYS[1]  cooldown  <prefix>{cooldown}:c:<fingerprint>  hash (see cooldown-check.lua)
-- KEYS[2]  index     <prefix>{cooldown}:index             sorted set: fingerprint -> the hash's expiry (ms)
-- ARGV[1]  fingerprint
-- ARGV[2]  status    the upstream's status
-- ARGV[3]  wait      ms the answer asked for (retry-after), already capped; '' when it named none
-- ARGV[4]  token     the request's token: a probe's extends the cooldown by one more strike
-- ARGV[5]  lease     ms a probe's claim lasts (the hash lives this long past the cooldown's end)
-- ARGV[6…] the backoff waits, ms, for strike 1, 2, …; the last one repeats
--
-- Strikes count the cooldown's failed probes: the first 429 starts strike 1, each probe answered 429
-- adds one, and a 429 for a request that was already in flight when the cooldown began (no probe)
-- adds none. The cooldown ends at now + the answer's retry-after, else the backoff wait of its strike,
-- and never earlier than it already did. A cooldown's hash is deleted by a successful probe
-- (cooldown-settle.lua), else expires on its own.
--
-- Returns {ms until the cooldown ends, strikes, 1 when this answer began the cooldown else 0}.

local state = redis.call('HMGET', KEYS[1], 'until', 'strikes', 'probe', 'probeUntil')
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local probed = state[3] and state[3] == ARGV[4]
local strikes = tonumber(state[2] or '0')
if not state[1] then strikes = 1 elseif probed then strikes = strikes + 1 end
local wait = tonumber(ARGV[3])
if not wait then wait = tonumber(ARGV[5 + math.min(strikes, #ARGV - 5)]) end
local untilMs = math.max(now + wait, tonumber(state[1] or '0'))
if not state[1] then redis.call('HSET', KEYS[1], 'since', now, 'probes', 0) end
redis.call('HSET', KEYS[1], 'until', untilMs, 'strikes', strikes, 'status', ARGV[2])
local probeUntil = 0
if probed then
  redis.call('HDEL', KEYS[1], 'probe', 'probeUntil')
else
  probeUntil = tonumber(state[4] or '0')
end
local expires = math.max(untilMs, probeUntil) + tonumber(ARGV[5])
redis.call('PEXPIRE', KEYS[1], expires - now)
redis.call('ZADD', KEYS[2], expires, ARGV[1])
-- Members whose hash expired on its own go with the next record; the index lives as long as its last.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('PTTL', KEYS[2]) < expires - now then redis.call('PEXPIRE', KEYS[2], expires - now) end
local began = 0
if not state[1] then began = 1 end
return {untilMs - now, strikes, began}
