-- cooldown-check.lua: may a request with this credential go upstream now?
--
-- KEYS[1]  cooldown  <prefix>{cooldown}:c:<fingerprint>  hash: until, strikes, status, since, probes,
--                                                       probe (the probing request's token), probeUntil
-- KEYS[2]  index     <prefix>{cooldown}:index             sorted set: fingerprint -> the hash's expiry (ms)
-- ARGV[1]  fingerprint
-- ARGV[2]  token     the asking request's random token
-- ARGV[3]  lease     ms a probe's claim lasts before another request may probe (its worker may have died)
--
-- Times are Redis's own clock (TIME), so workers whose clocks differ still agree; replies carry
-- durations, never instants.
--
-- Returns {'clear'} (no cooldown), {'wait', ms} (cooling for ms more), {'probing', ms} (the cooldown
-- has ended and another request probes; its claim lasts ms more), or {'probe'}: the cooldown has
-- ended and this request is the one let through to try; its outcome is reported with settle.lua or
-- record.lua under the same token.

local state = redis.call('HMGET', KEYS[1], 'until', 'probe', 'probeUntil')
if not state[1] then return {'clear'} end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local untilMs = tonumber(state[1])
if now < untilMs then return {'wait', untilMs - now} end
local probeUntil = tonumber(state[3] or '0')
if state[2] and now < probeUntil then return {'probing', probeUntil - now} end
local lease = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'probe', ARGV[2], 'probeUntil', now + lease)
redis.call('HINCRBY', KEYS[1], 'probes', 1)
-- The hash outlives the claim by one more lease, so a probe whose worker died is followed by another.
redis.call('PEXPIRE', KEYS[1], 2 * lease)
redis.call('ZADD', KEYS[2], now + 2 * lease, ARGV[1])
if redis.call('PTTL', KEYS[2]) < 2 * lease then redis.call('PEXPIRE', KEYS[2], 2 * lease) end
return {'probe'}
