-- append.lua: append one batch of events to one session, fenced and idempotent, atomically.
--
-- KEYS[1]  stream   <prefix>{s:<id>}:events
-- KEYS[2]  meta     <prefix>{s:<id>}:meta     (hash: epoch, seq, lastId, lastBatch, state, snap, sseq,
--                                              w:<writer>...)
-- KEYS[3]  blobset  <prefix>{s:<id>}:blobs    (set of blob key names this session references)
-- ARGV[1]  epoch       fencing token as decimal; "" = unfenced append (no epoch check)
-- ARGV[2]  expectedSeq last seq the caller believes the log has; "" = no check
-- ARGV[3]  writer      writer id (batch ids are "<writer>:<n>")
-- ARGV[4]  n           batch number of that writer, > 0, strictly increasing per writer
-- ARGV[5]  ttlMs       expiry for a finished session's keys; "0" = keep forever
-- ARGV[6]  epochFloor  raise meta epoch to at least this (import); "" = leave it
-- ARGV[7]  ackedSeq    the highest seq this writer was told is in the log: its previous batch's last
--                      seq, or for a first batch the head it started from; "" = no claim
-- ARGV[8]  B           number of blob keys referenced by the batch, then B blob key names
-- then per event: mode ("e" | "r"), kind, envelope JSON, and when mode is "r" the raw line text
--
-- Returns { outcome, lastSeq, epoch } where outcome is one of
--   "appended"      all events written with ids 0-(lastSeq+1) .. 0-(lastSeq+count); lastSeq = new last seq
--   "duplicate"     this writer's batch n (or a later one) is already in: nothing written; lastSeq =
--                   the seq after that writer's latest batch (a re-sent batch gets its own result back)
--   "fenced"        ARGV[1] is not the session's current epoch: nothing written; epoch = current epoch
--   "conflict"      ARGV[2] is not the current last seq: nothing written; lastSeq = current last seq
--   "rolled_back"   the log is behind what this writer was acknowledged (see below): nothing written;
--                   lastSeq = the log's real last seq, epoch = its current epoch
--   "missing_blob"  a referenced blob key does not exist (it expired between upload and append):
--                   nothing written; the client uploads it again and retries
-- The duplicate check comes first: a batch that made it in is reported as such even if the attempt
-- was fenced afterwards, so the sender never appends it a second time under any outcome.
--
-- Rollback check (before the epoch): the log only ever grows, and its epoch only ever rises, so a log
-- found behind what a writer was acknowledged lost acknowledged writes (a failover to a replica that
-- had not received them, a Redis restarted without its data). Writers of other kinds may append
-- between a writer's batches (turn.queued, decision.made, cancel), so the head is not required to
-- equal the writer's last seq, only not to be below it. `rolled_back` when
--   * the head is below ackedSeq (or below expectedSeq: a caller's exact expectation), or
--   * n > 1 with ackedSeq given and the writer's own record `w:<writer>` is missing or names an
--     earlier batch than n - 1: the batch it was acknowledged is gone, even if others' appends have
--     since pushed the head past its seq, or
--   * an epoch is given and the session's epoch is below it: the begin that handed it out is gone.
--
-- meta `snap` points at the session's latest session.snapshot event ("<seq>|<epoch>|<at>", "0" for a
-- session that has none), so a new attempt finds it without scanning the stream; `sseq` is the seq
-- this script last left, so a pointer that another script version may have passed by (its `seq` moved
-- on without `sseq`) is not trusted (see begin.lua), and is dropped by the next append here unless
-- that one brings a snapshot of its own.

local stream, meta, blobset = KEYS[1], KEYS[2], KEYS[3]
local epochArg, expectedArg, writer = ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])
local epochFloor = ARGV[6]
local ackedArg = ARGV[7]
local nblobs = tonumber(ARGV[8])

local m = redis.call('HMGET', meta, 'epoch', 'seq', 'w:' .. writer, 'state', 'expiring', 'snap', 'sseq')
local epoch = tonumber(m[1]) or 0
local seq = tonumber(m[2]) or 0

local seenN = 0
if m[3] then
  local sep = string.find(m[3], ':', 1, true)
  seenN = tonumber(string.sub(m[3], 1, sep - 1))
  if n <= seenN then
    return { 'duplicate', tonumber(string.sub(m[3], sep + 1)), epoch }
  end
end

local floor = tonumber(ackedArg) or 0
if expectedArg ~= '' and tonumber(expectedArg) > floor then floor = tonumber(expectedArg) end
if seq < floor then
  return { 'rolled_back', seq, epoch }
end
if ackedArg ~= '' and n > 1 and (not m[3] or seenN < n - 1) then
  return { 'rolled_back', seq, epoch }
end
if epochArg ~= '' and tonumber(epochArg) > epoch then
  return { 'rolled_back', seq, epoch }
end

if epochArg ~= '' and tonumber(epochArg) ~= epoch then
  return { 'fenced', seq, epoch }
end

if expectedArg ~= '' and tonumber(expectedArg) ~= seq then
  return { 'conflict', seq, epoch }
end

for b = 1, nblobs do
  if redis.call('EXISTS', ARGV[8 + b]) == 0 then
    return { 'missing_blob', seq, epoch }
  end
end

local state = m[4]
local fresh = seq == 0 and not m[6]
local passedBy = m[6] and tonumber(m[7]) ~= seq
local snapSeq, snapEnv
local i = 9 + nblobs
local last = #ARGV
while i <= last do
  local mode, kind, env = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  seq = seq + 1
  if mode == 'r' then
    redis.call('XADD', stream, '0-' .. seq, 'e', env, 'r', ARGV[i + 3])
    i = i + 4
  else
    redis.call('XADD', stream, '0-' .. seq, 'e', env)
    i = i + 3
  end
  if kind == 'session.snapshot' then
    snapSeq, snapEnv = seq, env
  end
  if kind == 'turn.queued' then
    state = 'queued'
  elseif kind == 'attempt.started' then
    state = 'running'
  elseif kind == 'turn.finished' then
    state = 'finished'
  elseif kind == 'turn.failed' then
    state = 'failed'
  elseif kind == 'turn.cancelled' then
    state = 'cancelled'
  elseif kind == 'turn.parked' then
    state = 'parked'
    -- Which turn parked last: its later attempts resume the parked call (the envelope's head is
    -- written in a fixed order, so the turn is found without decoding the JSON).
    local parkedTurn = string.match(string.sub(env, 1, 200), '"turn":"([^"]+)"')
    if parkedTurn then redis.call('HSET', meta, 'parkedTurn', parkedTurn) end
  end
end

for b = 1, nblobs do
  redis.call('SADD', blobset, ARGV[8 + b])
end

if epochFloor ~= '' and tonumber(epochFloor) > epoch then
  epoch = tonumber(epochFloor)
  redis.call('HSET', meta, 'epoch', epoch)
end

local batchId = writer .. ':' .. n
redis.call('HSET', meta, 'seq', seq, 'sseq', seq, 'lastId', '0-' .. seq, 'lastBatch', batchId, 'w:' .. writer, n .. ':' .. seq)
if snapSeq then
  -- The envelope's head is written in a fixed order (v, turn, attempt, epoch, at, kind): no need to
  -- decode a snapshot's whole JSON for two fields.
  local ep, at = string.match(string.sub(snapEnv, 1, 400), '"epoch":(%d+),"at":"([^"]+)"')
  if ep then
    redis.call('HSET', meta, 'snap', snapSeq .. '|' .. ep .. '|' .. at)
  else
    redis.call('HDEL', meta, 'snap')
  end
elseif fresh then
  redis.call('HSET', meta, 'snap', '0')
elseif passedBy then
  redis.call('HDEL', meta, 'snap')
end
if state then
  redis.call('HSET', meta, 'state', state)
end

local finished = state == 'finished' or state == 'failed' or state == 'cancelled'
if ttl > 0 and finished then
  redis.call('HSET', meta, 'expiring', '1')
  local members = redis.call('SMEMBERS', blobset)
  for _, k in ipairs(members) do
    redis.call('PEXPIRE', k, ttl)
  end
  redis.call('PEXPIRE', stream, ttl)
  redis.call('PEXPIRE', meta, ttl)
  redis.call('PEXPIRE', blobset, ttl)
elseif m[5] then
  redis.call('HDEL', meta, 'expiring')
  local members = redis.call('SMEMBERS', blobset)
  for _, k in ipairs(members) do
    redis.call('PERSIST', k)
  end
  redis.call('PERSIST', stream)
  redis.call('PERSIST', meta)
  redis.call('PERSIST', blobset)
end

return { 'appended', seq, epoch }
