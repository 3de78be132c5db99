-- priority.lua: the BullMQ priority of a newly queued turn, so that workers take tenants' turns in
-- turn: each tenant's turns get consecutive positions from where the queue's head is now, and BullMQ
-- takes the lowest position first (equal ones in the order they were queued). A tenant that queued 200
-- turns holds positions up to 200 ahead; one that queues now starts next to the head.
--
-- KEYS[1]  positions    <queue prefix>:<queue>:tenants:vt  (hash: tenant -> its newest turn's position)
-- KEYS[2]  prioritized  BullMQ's prioritized set (score = priority * 2^32 + a counter)
-- KEYS[3]  wait         BullMQ's wait list
-- KEYS[4]  delayed      BullMQ's delayed set
-- KEYS[5]  active       BullMQ's active list
-- ARGV[1]  tenant field ("-" for turns without a tenant)
-- ARGV[2]  the highest priority BullMQ accepts
--
-- Returns the priority. Positions start again from 1 once the queue holds no job at all; one that
-- would pass BullMQ's highest priority stays at it (those turns are then taken in the order queued).

if redis.call('ZCARD', KEYS[2]) == 0 and redis.call('LLEN', KEYS[3]) == 0
  and redis.call('ZCARD', KEYS[4]) == 0 and redis.call('LLEN', KEYS[5]) == 0 then
  redis.call('DEL', KEYS[1])
end
local current = 0
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if head[2] then current = math.floor(tonumber(head[2]) / 4294967296) - 1 end
local last = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local position = math.min(math.max(last, current) + 1, tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], ARGV[1], position)
return position
