-- commit.lua: store one projection step (read-model fields + checkpoint) atomically, compare-and-set.
--
-- KEYS[1]  model    <prefix>{s:<id>}:proj:v<N>:model  (hash: seq, core, summary, turns, t:<i>...)
-- KEYS[2]  pointer  <prefix>{s:<id>}:proj:ptr         (the version readers use)
-- KEYS[3]  log meta <prefix>{s:<id>}:meta             (the log's last seq, to know when a rebuild caught up)
-- KEYS[4]  old      the model key of the version the caller saw in the pointer (KEYS[1] when none)
-- ARGV[1]  version N
-- ARGV[2]  expected checkpoint (the seq the caller's state was loaded at; 0 = nothing stored)
-- ARGV[3]  new checkpoint
-- ARGV[4]  pointer value the caller saw ("" = none)
-- then field, value pairs
--
-- Returns { outcome, n }:
--   "committed"   written; n = 1 when this commit switched the pointer to N (and deleted the old keys)
--   "conflict"    the stored checkpoint is not ARGV[2] (another projector moved it): nothing written; n = it
--   "superseded"  the pointer names a newer version: this projector must stop; n = that version
--   "repoint"     the pointer changed since the caller read it: nothing written; n = the pointer

local model, ptrKey, meta, old = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local version = tonumber(ARGV[1])
local expected = tonumber(ARGV[2])
local newSeq = tonumber(ARGV[3])

local ptr = redis.call('GET', ptrKey)
local p = tonumber(ptr or '')
if p and p > version then
  return { 'superseded', p }
end
if (ptr or '') ~= ARGV[4] then
  return { 'repoint', p or 0 }
end

local cur = tonumber(redis.call('HGET', model, 'seq') or '0')
if cur ~= expected then
  return { 'conflict', cur }
end

redis.call('HSET', model, 'seq', newSeq)
for i = 5, #ARGV, 2 do
  redis.call('HSET', model, ARGV[i], ARGV[i + 1])
end

local switched = 0
if not p then
  redis.call('SET', ptrKey, version)
  switched = 1
elseif p < version then
  local logSeq = tonumber(redis.call('HGET', meta, 'seq') or '0')
  if newSeq >= logSeq then
    redis.call('SET', ptrKey, version)
    if old ~= model then
      redis.call('DEL', old)
    end
    switched = 1
  end
end
return { 'committed', switched }
