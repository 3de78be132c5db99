-- release.lua: give a running turn's slot back and take the oldest job that waits for one.
--
-- KEYS[1]  running  <prefix>{t:<tenant>}:running
-- KEYS[2]  blocked  <prefix>{t:<tenant>}:blocked  (list of job ids that found the tenant at its limit)
-- ARGV[1]  token    the turn's lease token
--
-- Returns the job id to wake, or "" when none waits.

redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('RPOP', KEYS[2]) or ''
