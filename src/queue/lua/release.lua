-- release.lua: give the session lease back, if it is still the caller's.
--
-- KEYS[1]  lease  <prefix>{s:<id>}:lease
-- ARGV[1]  token  the caller's lease token
--
-- Returns 1 when the lease was released, 0 when it was not the caller's (nothing changed).

if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
