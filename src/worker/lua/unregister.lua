-- unregister.lua: remove a worker's registry entry on a clean close, if it is still the caller's.
--
-- KEYS[1]  entry  <prefix>{workers}:w:<instance id>
-- KEYS[2]  live   <prefix>{workers}:live
-- ARGV[1]  boot   the process's boot token
-- ARGV[2]  id     the instance id
--
-- Returns 1 when removed, 0 when the entry was another process's or gone (nothing changed).

if redis.call('HGET', KEYS[1], 'boot') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
