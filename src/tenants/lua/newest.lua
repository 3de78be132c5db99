-- newest.lua: note a tenant's verified limits record as the newest seen, unless a newer one was.
--
-- KEYS[1]  newest  <prefix>tenants:limits-newest  (hash: tenant -> "<signed at, ms>|<signature>")
-- ARGV[1]  tenant
-- ARGV[2]  the record's signing time, ms
-- ARGV[3]  its signature
--
-- Returns { signing time, signature } of the newest record seen, this one's when it is (or is now)
-- the newest. A record signed at the same time with another signature does not replace it.

local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored then
  local atMs, signature = string.match(stored, '^(-?%d+)|(.*)$')
  if atMs ~= nil and tonumber(atMs) >= tonumber(ARGV[2]) then return { atMs, signature } end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '|' .. ARGV[3])
return { ARGV[2], ARGV[3] }
