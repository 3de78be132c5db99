-- reserve.lua: take one of a tenant's running slots for a turn's attempt, if its limits allow.
--
-- KEYS[1]  running  <prefix>{t:<tenant>}:running  (sorted set: lease token -> lapse time, ms)
-- KEYS[2]  spend    <prefix>{t:<tenant>}:spend    (hash: bucket number -> micro-USD)
-- KEYS[3]  blocked  <prefix>{t:<tenant>}:blocked  (list of job ids waiting for a slot)
-- ARGV[1]  token        the turn's lease token (a reservation lapses with the lease unless renewed)
-- ARGV[2]  leaseMs
-- ARGV[3]  maxRunning   0 = no limit
-- ARGV[4]  budget       micro-USD per window; 0 = no budget
-- ARGV[5]  bucketMs     spend bucket length
-- ARGV[6]  windowMs     the budget's rolling window
-- ARGV[7]  job id       the turn's job: once it has a slot it waits no more, so it leaves the blocked
--                       list (else a release would pop it and wake nobody, and the list would grow)
--
-- Time is Redis's own (TIME), so workers with skewed clocks agree on what has lapsed.
-- Returns { status, running (with this one when reserved), spent micro-USD in the window,
--           the oldest bucket with spend in the window (-1 when none) }
-- where status is "ok" (reserved, or already held by this token: renewed), "at_limit" or "over_budget".

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local leaseMs = tonumber(ARGV[2])
local maxRunning = tonumber(ARGV[3])
local budget = tonumber(ARGV[4])
local bucketMs = tonumber(ARGV[5])
local firstBucket = math.floor((now - tonumber(ARGV[6])) / bucketMs)

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)

-- The partly aged-out oldest bucket counts whole: the window never forgets spend early.
local spent = 0
local oldest = -1
local buckets = redis.call('HGETALL', KEYS[2])
for i = 1, #buckets, 2 do
  local bucket = tonumber(buckets[i])
  if bucket < firstBucket then
    redis.call('HDEL', KEYS[2], buckets[i])
  else
    spent = spent + tonumber(buckets[i + 1])
    if oldest == -1 or bucket < oldest then oldest = bucket end
  end
end

local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
local running = redis.call('ZCARD', KEYS[1])
if not held then
  if maxRunning > 0 and running >= maxRunning then return { 'at_limit', running, spent, oldest } end
  if budget > 0 and spent >= budget then return { 'over_budget', running, spent, oldest } end
  running = running + 1
end
if ARGV[7] ~= '' then redis.call('LREM', KEYS[3], 0, ARGV[7]) end
redis.call('ZADD', KEYS[1], now + leaseMs, ARGV[1])
redis.call('PEXPIRE', KEYS[1], leaseMs, 'GT')
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], leaseMs) end
return { 'ok', running, spent, oldest }
