"""Lua scripts: every job transition that touches several keys runs as one atomic script.

Attempt fencing: a transition that concerns an attempt names it, and the script does nothing
(returns 0) unless the job is still on that attempt, so an answer from a superseded attempt
is ignored.
"""

from __future__ import annotations

# KEYS: job, pending, counter, idempotency-or-"" ; ARGV: id, explicit number or "", front,
# priority, idempotency ttl ms, idempotency value, then field/value pairs for the job hash.
ENQUEUE = """
if KEYS[4] ~= '' then
  local previous = redis.call('GET', KEYS[4])
  if previous then return {'idempotent', previous} end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local number = ARGV[2]
if number == '' then
  local n = redis.call('INCR', KEYS[3]) - 1
  if ARGV[3] == '1' and n ~= 0 then n = -n end
  number = string.format('%d', n)
end
local score = -tonumber(ARGV[4]) * 1e12 + tonumber(number)
redis.call('HSET', KEYS[1], 'state', 'pending', 'number', number, 'score', tostring(score),
  unpack(ARGV, 7))
redis.call('ZADD', KEYS[2], score, ARGV[1])
if KEYS[4] ~= '' then redis.call('SET', KEYS[4], ARGV[6], 'PX', ARGV[5]) end
return {'ok', number}
"""

# KEYS: job, pending, leases, worker-jobs, attempts ; ARGV: id, worker, now ms, lease deadline ms
CLAIM = """
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return 0 end
local attempt = redis.call('HINCRBY', KEYS[1], 'attempt', 1)
redis.call('HSET', KEYS[1], 'state', 'assigned', 'worker', ARGV[2], 'claimed_at_ms', ARGV[3])
redis.call('HDEL', KEYS[1], 'started_at_ms')
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('RPUSH', KEYS[5], cjson.encode({attempt = attempt, worker = ARGV[2],
  claimed_at_ms = tonumber(ARGV[3])}))
return redis.call('HGETALL', KEYS[1])
"""

_FENCE = """
local state = redis.call('HGET', KEYS[1], 'state')
if tostring(redis.call('HGET', KEYS[1], 'attempt')) ~= ARGV[2] then return 0 end
if state ~= 'assigned' and state ~= 'running' then return 0 end
"""

_CLOSE_ATTEMPT = """
local function close_attempt(outcome, now)
  local last = redis.call('LINDEX', KEYS[5], -1)
  if not last then return end
  local record = cjson.decode(last)
  record['outcome'] = outcome
  record['ended_at_ms'] = tonumber(now)
  local started = redis.call('HGET', KEYS[1], 'started_at_ms')
  if started then record['started_at_ms'] = tonumber(started) end
  redis.call('LSET', KEYS[5], -1, cjson.encode(record))
end
"""

_RELEASE = """
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
"""

# finish(): the terminal write shared by FINISH and REQUEUE (history entry, trim, expiry).
_FINISH = """
local function finish(s, entry, now, max_items, ttl_ms, hkeys, entry_prefix)
  redis.call('HSET', KEYS[1], 'state', s, 'finished_at_ms', now)
  redis.call('SET', hkeys[3], entry)
  local seq = redis.call('INCR', hkeys[2])
  redis.call('ZADD', hkeys[1], seq, ARGV[1])
  local excess = redis.call('ZCARD', hkeys[1]) - tonumber(max_items)
  if excess > 0 then
    local old = redis.call('ZPOPMIN', hkeys[1], excess)
    for i = 1, #old, 2 do redis.call('DEL', entry_prefix .. old[i]) end
  end
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
  redis.call('PEXPIRE', KEYS[5], ttl_ms)
end
"""

# KEYS: job, pending, leases, worker-jobs, attempts, history, history seq, entry
# ARGV: id, attempt, state, entry, now ms, history max items, ttl ms, entry key prefix
FINISH = (
    _CLOSE_ATTEMPT
    + _FINISH
    + _FENCE
    + _RELEASE
    + """
close_attempt(ARGV[3], ARGV[5])
finish(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], {KEYS[6], KEYS[7], KEYS[8]}, ARGV[8])
return 1
"""
)

# KEYS: as FINISH ; ARGV: id, attempt, count failure (1/0), max failures, outcome, now ms,
# give-up entry, history max items, ttl ms, entry key prefix.
# Returns 1 requeued, 2 gave up, 0 fenced off.
REQUEUE = (
    _CLOSE_ATTEMPT
    + _FINISH
    + _FENCE
    + _RELEASE
    + """
close_attempt(ARGV[5], ARGV[6])
local failures = tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')
if ARGV[3] == '1' then
  failures = failures + 1
  redis.call('HSET', KEYS[1], 'failures', failures)
end
if failures >= tonumber(ARGV[4]) then
  finish('error', ARGV[7], ARGV[6], ARGV[8], ARGV[9], {KEYS[6], KEYS[7], KEYS[8]}, ARGV[10])
  return 2
end
redis.call('HSET', KEYS[1], 'state', 'pending')
redis.call('HDEL', KEYS[1], 'worker', 'started_at_ms')
redis.call('ZADD', KEYS[2], redis.call('HGET', KEYS[1], 'score'), ARGV[1])
return 1
"""
)

# KEYS: job, leases ; ARGV: id, attempt, now ms, lease deadline ms
START = """
if tostring(redis.call('HGET', KEYS[1], 'attempt')) ~= ARGV[2] then return 0 end
if redis.call('HGET', KEYS[1], 'state') ~= 'assigned' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'running', 'started_at_ms', ARGV[3])
redis.call('ZADD', KEYS[2], 'XX', ARGV[4], ARGV[1])
return 1
"""

# KEYS: job, pending ; ARGV: id, now ms, ttl ms
CANCEL_PENDING = """
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'finished_at_ms', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# KEYS: job, pending, leases, worker-jobs, attempts ; ARGV: id, attempt, now ms, ttl ms
CANCEL_HELD = (
    _CLOSE_ATTEMPT
    + _FENCE
    + _RELEASE
    + """
close_attempt('cancelled', ARGV[3])
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'finished_at_ms', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[5], ARGV[4])
return 1
"""
)

# KEYS: pending ; ARGV: how many, job key prefix.
# Returns id, placement, priority, enqueued_at_ms for each job.
PEEK = """
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
local out = {}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', ARGV[2] .. id, 'placement', 'priority', 'enqueued_at_ms',
    'number')
  table.insert(out, id)
  table.insert(out, f[1] or '')
  table.insert(out, f[2] or '0')
  table.insert(out, f[3] or '0')
  table.insert(out, f[4] or '0')
end
return out
"""

# KEYS: job, pending, leases, worker-jobs, attempts ; ARGV: id, worker, attempt, running (1/0),
# now ms, lease deadline ms, claimed_at_ms, started_at_ms or '', worker-jobs key prefix and
# suffix, then field/value pairs to recreate the job hash with (none: it cannot be recreated).
# After a Redis restart that lost writes: this node holds the job for `worker` under `attempt`,
# so Redis must say so too. Never lowers the attempt, never revives an ended job, and leaves a
# job requeued under this very attempt alone. Returns 0 left alone, 1 repaired, 2 already so.
REASSERT = (
    _CLOSE_ATTEMPT
    + """
local attempt = tonumber(ARGV[3])
local exists = redis.call('EXISTS', KEYS[1]) == 1
if not exists and #ARGV < 11 then return 0 end
local state = redis.call('HGET', KEYS[1], 'state')
local had = tonumber(redis.call('HGET', KEYS[1], 'attempt') or '0')
local old_worker = redis.call('HGET', KEYS[1], 'worker')
local held = state == 'assigned' or state == 'running'
if exists then
  if had > attempt then return 0 end
  if state ~= 'pending' and not held then return 0 end
  if had == attempt and not held then return 0 end
end
local already = exists and had == attempt and held and old_worker == ARGV[2]
  and redis.call('ZSCORE', KEYS[3], ARGV[1])
if not exists then
  redis.call('HSET', KEYS[1], unpack(ARGV, 11))
elseif had < attempt and held then
  close_attempt('lost in a Redis restart', ARGV[5])
  if old_worker then redis.call('SREM', ARGV[9] .. old_worker .. ARGV[10], ARGV[1]) end
end
local running = ARGV[4] == '1' or (had == attempt and state == 'running')
redis.call('HSET', KEYS[1], 'state', running and 'running' or 'assigned', 'worker', ARGV[2],
  'attempt', ARGV[3])
if had < attempt or not exists then
  redis.call('HSET', KEYS[1], 'claimed_at_ms', ARGV[7])
  redis.call('HDEL', KEYS[1], 'started_at_ms')
end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'started_at_ms', ARGV[8]) end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
local last = redis.call('LINDEX', KEYS[5], -1)
if not last or tonumber(cjson.decode(last)['attempt']) < attempt then
  redis.call('RPUSH', KEYS[5], cjson.encode({attempt = attempt, worker = ARGV[2],
    claimed_at_ms = tonumber(ARGV[7])}))
end
if already then return 2 end
return 1
"""
)

# KEYS: counter ; ARGV: floor. Raises the counter to `floor` (a restart rolled it back).
RAISE_COUNTER = """
local now = tonumber(redis.call('GET', KEYS[1]) or '0')
if now < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
return 0
"""
