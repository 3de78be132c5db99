-- register.lua: add a turn to its session's pending list, once per turn id (an idempotent enqueue).
--
-- KEYS[1]  turns       <prefix>{s:<id>}:turns       (list of pending turn ids, the head runs next)
-- KEYS[2]  registered  <prefix>{s:<id>}:registered  (hash turn id -> enqueue time in ms)
-- KEYS[3]  conf        <prefix>{s:<id>}:conf        (hash of session settings: onLostSession, warm)
-- KEYS[4]  meta        <prefix>{s:<id>}:meta        (the log's meta hash: only read)
-- ARGV[1]  turn id
-- ARGV[2]  nowMs          enqueue time
-- ARGV[3]  onLostSession  the session's policy, set only by its first turn; "" = leave it
-- ARGV[4]  warm           "1" / "0": the session's warm mode from this turn on; "" = leave it
-- ARGV[5]  "1": the caller found the session in Redis (or restored it): refuse, writing nothing, when
--          its meta is gone since (retention removed it in between); "" = a new session is fine
-- ARGV[6]  tenant  the turn's tenant; "" = none named (the session's, if it has one)
--
-- Returns { 1 when the turn is new (appended to the list) else 0, the session's warm mode ("1" or ""),
-- the session's tenant ("" none) }, or { -1, "", "" } when ARGV[5] expected the session and its meta is
-- gone, or { -2, "", tenant } when the session belongs to another tenant than ARGV[6] names.

if ARGV[5] == '1' and redis.call('EXISTS', KEYS[4]) == 0 then return { -1, '', '' } end
local tenant = redis.call('HGET', KEYS[3], 'tenant') or ''
if ARGV[6] ~= '' and tenant ~= '' and tenant ~= ARGV[6] then return { -2, '', tenant } end
if tenant == '' and ARGV[6] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  -- Only a session's first turn names its tenant: a session that ran turns without one keeps none.
  if redis.call('LLEN', KEYS[1]) == 0 and redis.call('HLEN', KEYS[2]) == 0 then
    redis.call('HSET', KEYS[3], 'tenant', ARGV[6])
    tenant = ARGV[6]
  else
    return { -2, '', '' }
  end
end
local warm = ARGV[4]
if warm ~= '' then redis.call('HSET', KEYS[3], 'warm', warm) else warm = redis.call('HGET', KEYS[3], 'warm') or '' end
if warm ~= '1' then warm = '' end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return { 0, warm, tenant } end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSETNX', KEYS[3], 'onLostSession', ARGV[3]) end
return { 1, warm, tenant }
