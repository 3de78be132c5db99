-- cooldown-settle.lua: a probe's outcome other than another 429, 529 or 503.
--
-- KEYS[1]  cooldown  <prefix>{cooldown}:c:<fingerprint>  hash (see cooldown-check.lua)
-- KEYS[2]  index     <prefix>{cooldown}:index             sorted set: fingerprint -> the hash's expiry (ms)
-- ARGV[1]  fingerprint
-- ARGV[2]  token     the probe's token
-- ARGV[3]  outcome   'clear': the upstream answered otherwise, so the cooldown ends for the whole fleet
--                    (strikes start again from nothing); 'release': the probe never reached the
--                    upstream (its client hung up, another policy refused it, the upstream could not be
--                    reached), so the next request that asks may probe at once
--
-- Only the token that holds the probe settles it: a late outcome of an earlier probe changes nothing.
-- Returns 1 when settled, 0 when the token held no probe.

if redis.call('HGET', KEYS[1], 'probe') ~= ARGV[2] then return 0 end
if ARGV[3] == 'clear' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('DEL', KEYS[2]) end
else
  redis.call('HDEL', KEYS[1], 'probe', 'probeUntil')
end
return 1
