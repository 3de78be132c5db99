-- renew.lua: extend a running turn's reservation with its lease.
--
-- KEYS[1]  running  <prefix>{t:<tenant>}:running
-- ARGV[1]  token    the turn's lease token
-- ARGV[2]  leaseMs
--
-- Returns 1 when extended, 0 when the reservation had lapsed (it is not taken again here: a lapsed
-- slot may already be someone else's).

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local leaseMs = tonumber(ARGV[2])
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not held or tonumber(held) <= now then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + leaseMs, ARGV[1])
redis.call('PEXPIRE', KEYS[1], leaseMs, 'GT')
return 1
