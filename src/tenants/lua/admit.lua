-- admit.lua: let one model call of a tenant with a budget go out, holding the most it can cost until
-- its real cost is counted (spend.lua), so calls made at once cannot all pass the same check.
--
-- KEYS[1]  spend  <prefix>{t:<tenant>}:spend  (hash: bucket number -> micro-USD)
-- KEYS[2]  calls  <prefix>{t:<tenant>}:calls  (sorted set: call id -> when counted, ms)
-- KEYS[3]  holds  <prefix>{t:<tenant>}:holds  (hash: call id -> "<micro-USD>:<lapse time, ms>")
-- ARGV[1]  call id
-- ARGV[2]  the call's hold: the most it can cost, micro-USD
-- ARGV[3]  holdMs     how long a hold lasts uncounted
-- ARGV[4]  budget     micro-USD per window
-- ARGV[5]  bucketMs
-- ARGV[6]  windowMs
--
-- Returns { status, spent micro-USD in the window, held micro-USD }, where status is
--   "over"  the tenant has spent its budget: the call is refused;
--   "ok"    the call may go out (its hold is added): what is spent and held, this call's hold
--           included, fits the budget; or no other call of the tenant is out, so this one may
--           overshoot the budget by at most its own cost;
--   "wait"  other calls are out and this one's hold does not fit beside them: ask again when they end.
-- A hold that lapsed uncounted (its worker died mid-call) is counted as spent at its full amount:
-- the call may have cost that much.

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local hold = tonumber(ARGV[2])
local holdMs = tonumber(ARGV[3])
local budget = tonumber(ARGV[4])
local bucketMs = tonumber(ARGV[5])
local windowMs = tonumber(ARGV[6])
local keepMs = windowMs + bucketMs
local firstBucket = math.floor((now - windowMs) / bucketMs)

local held = 0
local out = 0
local holds = redis.call('HGETALL', KEYS[3])
for i = 1, #holds, 2 do
  local micros, lapse = string.match(holds[i + 1], '^(%d+):(%d+)$')
  micros = tonumber(micros)
  lapse = tonumber(lapse)
  if micros == nil or lapse == nil then
    redis.call('HDEL', KEYS[3], holds[i])
  elseif lapse <= now then
    redis.call('HDEL', KEYS[3], holds[i])
    if redis.call('ZADD', KEYS[2], 'NX', now, holds[i]) == 1 then
      redis.call('HINCRBY', KEYS[1], math.floor(now / bucketMs), micros)
      redis.call('PEXPIRE', KEYS[1], keepMs)
      redis.call('PEXPIRE', KEYS[2], keepMs)
    end
  else
    held = held + micros
    out = out + 1
  end
end

local spent = 0
local buckets = redis.call('HGETALL', KEYS[1])
for i = 1, #buckets, 2 do
  if tonumber(buckets[i]) >= firstBucket then spent = spent + tonumber(buckets[i + 1]) end
end

if spent >= budget then return { 'over', spent, held } end
if out > 0 and spent + held + hold > budget then return { 'wait', spent, held } end
redis.call('HSET', KEYS[3], ARGV[1], hold .. ':' .. (now + holdMs))
redis.call('PEXPIRE', KEYS[3], holdMs * 2)
return { 'ok', spent, held + hold }
