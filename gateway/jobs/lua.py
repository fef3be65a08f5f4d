"""Lua scripts: every job transition that touches several keys runs as one atomic script.

Attempt fencing: a transition that concerns an attempt names it, and the script does nothing
(returns 0) unless the job is still on that attempt, so an answer from a superseded attempt
is ignored.

The group index (`Keys.queue_index`: classes, work, arrivals and jobs, and one `queue_group`
ZSET per class of interchangeable jobs) mirrors `pending`: every script that adds a job to
`pending` or removes one calls `index_add` or `index_remove` in the same script, so the two
never disagree, on any node. The index keys come last in KEYS, from position `k`.
"""

from __future__ import annotations

# index_add / index_remove: the job's group (hash field `queue_group`, written at enqueue with
# `class_key` and `work_units`) gains or loses it; sums move only when membership changes, so
# both are idempotent. An emptied group disappears. A job hash without `queue_group` (written
# before the index existed) is left out; the start-up check rebuilds the index then.
_INDEX = """
local function work_micro(units)
  return math.floor(tonumber(units or '1') * 1e6 + 0.5)
end
local function index_add(job, id, score, k)
  local f = redis.call('HMGET', job, 'queue_group', 'class_key', 'work_units', 'enqueued_at_ms',
    'priority', 'number')
  if not f[1] or redis.call('ZADD', f[1], score, id) == 0 then return end
  local units, arrived = f[3] or '1', f[4] or '0'
  redis.call('HSET', KEYS[k], f[1], f[2])
  redis.call('HINCRBY', KEYS[k + 1], f[1], string.format('%d', work_micro(units)))
  redis.call('HINCRBY', KEYS[k + 2], f[1], string.format('%d', tonumber(arrived)))
  local shown = {f[5] or '0', arrived, f[6] or '0', units}
  redis.call('HSET', KEYS[k + 3], id, table.concat(shown, ' '))
end
local function index_remove(job, id, k)
  local f = redis.call('HMGET', job, 'queue_group', 'work_units', 'enqueued_at_ms')
  if not f[1] or redis.call('ZREM', f[1], id) == 0 then return end
  redis.call('HDEL', KEYS[k + 3], id)
  if redis.call('ZCARD', f[1]) == 0 then
    for i = k, k + 2 do redis.call('HDEL', KEYS[i], f[1]) end
    return
  end
  redis.call('HINCRBY', KEYS[k + 1], f[1], string.format('%d', -work_micro(f[2])))
  redis.call('HINCRBY', KEYS[k + 2], f[1], string.format('%d', -tonumber(f[3] or '0')))
end
"""

# KEYS: job, pending, counter, idempotency-or-"", then the index (5-8) ; ARGV: id, explicit
# number or "", front, priority, idempotency ttl ms, idempotency value, then field/value pairs
# for the job hash.
ENQUEUE = (
    _INDEX
    + """
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
index_add(KEYS[1], ARGV[1], score, 5)
if KEYS[4] ~= '' then redis.call('SET', KEYS[4], ARGV[6], 'PX', ARGV[5]) end
return {'ok', number}
"""
)

# KEYS: job, pending, leases, worker-jobs, attempts, then the index (6-9) ; ARGV: id, worker,
# now ms, lease deadline ms, and optionally why the policy placed it there (JSON, kept in the
# attempt record)
CLAIM = (
    _INDEX
    + """
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
index_remove(KEYS[1], ARGV[1], 6)
if redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return 0 end
local attempt = redis.call('HINCRBY', KEYS[1], 'attempt', 1)
redis.call('HSET', KEYS[1], 'state', 'assigned', 'worker', ARGV[2], 'claimed_at_ms', ARGV[3])
redis.call('HDEL', KEYS[1], 'started_at_ms')
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
local record = {attempt = attempt, worker = ARGV[2], claimed_at_ms = tonumber(ARGV[3])}
if ARGV[5] and ARGV[5] ~= '' then record.placement = cjson.decode(ARGV[5]) end
redis.call('RPUSH', KEYS[5], cjson.encode(record))
return redis.call('HGETALL', KEYS[1])
"""
)

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

local function keep_ledger(ledger, ledgers_key, max_items)
  if ledger == nil or ledger == '' then return end
  redis.call('HSET', KEYS[1], 'ledger', ledger)
  redis.call('LPUSH', ledgers_key, ledger)
  redis.call('LTRIM', ledgers_key, 0, tonumber(max_items) - 1)
end
"""

# KEYS: job, pending, leases, worker-jobs, attempts, history, history seq, entry, ledgers
# ARGV: id, attempt, state, entry, now ms, history max items, ttl ms, entry key prefix, ledger
# (JSON, or empty: none)
FINISH = (
    _CLOSE_ATTEMPT
    + _FINISH
    + _FENCE
    + _RELEASE
    + """
close_attempt(ARGV[3], ARGV[5])
finish(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], {KEYS[6], KEYS[7], KEYS[8]}, ARGV[8])
keep_ledger(ARGV[9], KEYS[9], ARGV[6])
return 1
"""
)

# KEYS: as FINISH, then the index (9-12) ; ARGV: id, attempt, count failure (1/0), max failures,
# outcome, now ms, give-up entry, history max items, ttl ms, entry key prefix.
# Returns 1 requeued, 2 gave up, 0 fenced off.
REQUEUE = (
    _INDEX
    + _CLOSE_ATTEMPT
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
local score = redis.call('HGET', KEYS[1], 'score')
if redis.call('ZADD', KEYS[2], score, ARGV[1]) == 1 then index_add(KEYS[1], ARGV[1], score, 9) end
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

# KEYS: job, pending, then the index (3-6) ; ARGV: id, now ms, ttl ms
CANCEL_PENDING = (
    _INDEX
    + """
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
index_remove(KEYS[1], ARGV[1], 3)
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'finished_at_ms', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
)

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

# KEYS: job, pending, leases, worker-jobs, attempts, then the index (6-9) ; ARGV: id, worker,
# attempt, running (1/0), now ms, lease deadline ms, claimed_at_ms, started_at_ms or '',
# worker-jobs key prefix and suffix, then field/value pairs to recreate the job hash with
# (none: it cannot be recreated).
# After a Redis restart that lost writes: this node holds the job for `worker` under `attempt`,
# so Redis must say so too. Never lowers the attempt, never revives an ended job, and leaves a
# job requeued under this very attempt alone. Returns 0 left alone, 1 repaired, 2 already so.
REASSERT = (
    _INDEX
    + _CLOSE_ATTEMPT
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
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then index_remove(KEYS[1], ARGV[1], 6) end
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

# KEYS: pending, then the index (2-5) ; ARGV: jobs shown per group.
# Returns, as one JSON text: the number of waiting jobs, then for each group [group key,
# class key, count, summed work millionths, summed enqueued_at_ms, its first ids, what the
# jobs hash says of each, what it says of its last job]. A few reads per group, whatever
# its size.
QUEUE_GROUPS = """
local out = {redis.call('ZCARD', KEYS[1])}
local classes = redis.call('HGETALL', KEYS[2])
for i = 1, #classes, 2 do
  local group = classes[i]
  local ids = redis.call('ZRANGE', group, 0, tonumber(ARGV[1]) - 1)
  local jobs = {}
  for first = 1, #ids, 1000 do  -- unpack is limited to a few thousand values
    local part = redis.call('HMGET', KEYS[5], unpack(ids, first, math.min(first + 999, #ids)))
    for _, value in ipairs(part) do table.insert(jobs, value) end
  end
  local last = redis.call('ZRANGE', group, -1, -1)[1]
  table.insert(out, {group, classes[i + 1], redis.call('ZCARD', group),
    redis.call('HGET', KEYS[3], group) or '0', redis.call('HGET', KEYS[4], group) or '0',
    ids, jobs, last and redis.call('HGET', KEYS[5], last) or false})
end
return cjson.encode(out)
"""

# KEYS: pending, then the index (2-5). Returns {waiting jobs, jobs in the groups, jobs in the
# jobs hash}: all equal when in step.
INDEX_COUNTS = """
local indexed = 0
for _, group in ipairs(redis.call('HKEYS', KEYS[2])) do
  indexed = indexed + redis.call('ZCARD', group)
end
return {redis.call('ZCARD', KEYS[1]), indexed, redis.call('HLEN', KEYS[5])}
"""

# KEYS: job ; ARGV: field/value pairs (`queue_group`, `class_key`, `work_units`).
# Writes them into a job hash written before the index existed; never creates a hash.
BACKFILL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[1], 'queue_group') == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""

# KEYS: the index (1-4). Empties it: every group and the four hashes.
CLEAR_INDEX = """
for _, group in ipairs(redis.call('HKEYS', KEYS[1])) do redis.call('DEL', group) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 1
"""

# KEYS: pending, then the index (2-5) ; ARGV: job key prefix, then job ids.
# Puts in the index those of the jobs that wait (a rebuild, one batch at a time: a job that
# arrives or leaves meanwhile updates the index itself). Returns the ids of the waiting ones it
# left out (their hash names no group).
INDEX_JOBS = (
    _INDEX
    + """
local missing = {}
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  local job = ARGV[1] .. ARGV[i]
  if score and redis.call('HEXISTS', job, 'queue_group') == 1 then
    index_add(job, ARGV[i], score, 2)
  elseif score then
    table.insert(missing, ARGV[i])
  end
end
return missing
"""
)

# KEYS: as REQUEUE, then worker-nodes ; ARGV: as REQUEUE, then the worker, the node key prefix.
# REQUEUE only while the node that owns the worker has lapsed (its key expired): a node that
# is back, or a new node that took the worker over, settles the job itself.
TAKE_OVER = (
    """
local owner = redis.call('HGET', KEYS[13], ARGV[11])
if owner and redis.call('EXISTS', ARGV[12] .. owner) == 1 then return 0 end
"""
    + REQUEUE
)

# KEYS: node, nodes, worker-nodes ; ARGV: node name, record JSON, ttl ms, node key prefix,
# then the node's worker names. Registers (or renews) the node unless one of its worker names
# belongs to another live node: then returns that worker and its owner, and changes nothing.
JOIN = """
for i = 5, #ARGV do
  local owner = redis.call('HGET', KEYS[3], ARGV[i])
  if owner and owner ~= ARGV[1] and redis.call('EXISTS', ARGV[4] .. owner) == 1 then
    return {ARGV[i], owner}
  end
end
for i = 5, #ARGV do redis.call('HSET', KEYS[3], ARGV[i], ARGV[1]) end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
return {}
"""
