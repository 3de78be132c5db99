-- retire.lua: delete every Redis key of one ended session, once its history is safe elsewhere (the
-- archive) or the operator chose to discard it. Fenced: it refuses unless the session is still what
-- the caller copied, so a turn enqueued or an event appended after the copy keeps the session.
--
-- KEYS[1]  meta        <prefix>{s:<id>}:meta        (hash: seq, state, restoring...)
-- KEYS[2]  turns       <prefix>{s:<id>}:turns       (list of pending turn ids)
-- KEYS[3]  lease       <prefix>{s:<id>}:lease       (the running attempt's lease)
-- KEYS[4]  registered  <prefix>{s:<id>}:registered  (hash of every turn id ever enqueued)
-- KEYS[5]  blobs       <prefix>{s:<id>}:blobs       (set of the session's blob key names)
-- KEYS[6]  restoring   <prefix>{s:<id>}:restoring   (held while a restore writes the session back)
-- KEYS[7..11] events, conf, cancel, deferred, warm: the session's other keys, deleted with it
-- ARGV[1]  expected seq: the last seq of the copy
-- ARGV[2]  expected number of registered turns in the copy
-- ARGV[3..] further keys of this session to delete (its read models); like the blob keys, each must
--           carry the session's hash tag, and one that does not is left alone
--
-- Returns { outcome, n }:
--   "removed"     every key deleted; n = how many keys existed
--   "gone"        the session's meta is already gone (an earlier run removed it); nothing written
--   "pending"     a turn is waiting or running; n = how many are pending
--   "leased"      an attempt holds the session's lease
--   "restoring"   a restore is writing the session back
--   "appended"    the log moved past the copy; n = its last seq
--   "registered"  a turn was enqueued after the copy; n = how many are registered now
-- Every blob key named in `:blobs` shares the session's hash tag (the append script only adds keys
-- of its own session), so deleting them stays inside this script's slot; a name that does not is skipped.

local meta, turns, lease, registered, blobs, restoring = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

if redis.call('EXISTS', meta) == 0 then return { 'gone', 0 } end
local pending = redis.call('LLEN', turns)
if pending > 0 then return { 'pending', pending } end
if redis.call('EXISTS', lease) == 1 then return { 'leased', 0 } end
if redis.call('EXISTS', restoring) == 1 or redis.call('HEXISTS', meta, 'restoring') == 1 then
  return { 'restoring', 0 }
end
local seq = tonumber(redis.call('HGET', meta, 'seq') or '0') or 0
if seq ~= tonumber(ARGV[1]) then return { 'appended', seq } end
local count = redis.call('HLEN', registered)
if count ~= tonumber(ARGV[2]) then return { 'registered', count } end

local removed = 0
local tag = string.sub(meta, 1, #meta - #'meta')
local function ours(key) return string.sub(key, 1, #tag) == tag end
for _, key in ipairs(redis.call('SMEMBERS', blobs)) do
  if ours(key) then removed = removed + redis.call('DEL', key) end
end
for i = 3, #ARGV do
  if ours(ARGV[i]) then removed = removed + redis.call('DEL', ARGV[i]) end
end
for i = 1, #KEYS do
  if i ~= 6 then removed = removed + redis.call('DEL', KEYS[i]) end
end
return { 'removed', removed }
