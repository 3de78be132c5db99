-- begin.lua: begin an attempt of a turn; bumps the session's epoch (the fencing token).
--
-- KEYS[1]  stream   <prefix>{s:<id>}:events
-- KEYS[2]  meta     <prefix>{s:<id>}:meta
-- KEYS[3]  blobset  <prefix>{s:<id>}:blobs
-- ARGV[1]  turn id
-- Returns { epoch, attempt, snap, seq }: epoch is the new session epoch (every earlier epoch is now
-- fenced); attempt counts the attempts of this turn (1 for the first; resets when the turn changes);
-- snap is meta `snap` (the latest session.snapshot, see append.lua) when append.lua left it current,
-- else ""; seq is the log's last seq, which the attempt's writer claims as acknowledged on its first
-- batch (append.lua's rollback check).
-- A session that was set to expire (finished, with retention) is made persistent again: a new
-- attempt must never lose its epoch counter to expiry, or an old epoch could become current again.

local meta = KEYS[2]
local epoch = redis.call('HINCRBY', meta, 'epoch', 1)
local cur = redis.call('HMGET', meta, 'turn', 'expiring', 'snap', 'seq', 'sseq')
local attempt
if cur[1] == ARGV[1] then
  attempt = redis.call('HINCRBY', meta, 'attempt', 1)
else
  attempt = 1
  redis.call('HSET', meta, 'turn', ARGV[1], 'attempt', 1)
end
if cur[2] then
  redis.call('HDEL', meta, 'expiring')
  local members = redis.call('SMEMBERS', KEYS[3])
  for _, k in ipairs(members) do
    redis.call('PERSIST', k)
  end
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', meta)
  redis.call('PERSIST', KEYS[3])
end
local snap = ''
if cur[3] and cur[4] == cur[5] then snap = cur[3] end
return { epoch, attempt, snap, tonumber(cur[4]) or 0 }
