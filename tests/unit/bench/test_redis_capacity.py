"""bench.redis_capacity on the session's real Redis: what it counts per job is what the store
writes, and its consumers run each job once."""

from __future__ import annotations

import redis

from bench.redis_capacity import at_rest, through_the_store
from gateway.jobs.keys import Keys
from gateway.redis_server import EmbeddedRedis

JOBS = 20


async def test_a_finished_job_leaves_its_record_attempts_and_entry(
    redis_server: EmbeddedRedis,
) -> None:
    bare = await at_rest(redis_server, JOBS, workers=2, extra_kib=0)
    padded = await at_rest(redis_server, JOBS, workers=2, extra_kib=4)
    # one hash accepted; then its attempt list and history entry (plus the farm's few keys)
    assert 1 <= bare.accepted.keys < 1.5
    assert 3 <= bare.finished.keys < 3.5
    assert bare.expiring_bytes > 0 and bare.entry_bytes > 0
    # extra_data is stored twice: in the record and in the history entry
    assert padded.expiring_bytes - bare.expiring_bytes > 4 * 1024
    assert padded.entry_bytes - bare.entry_bytes > 4 * 1024


def test_the_consumers_finish_every_accepted_job_once(redis_server: EmbeddedRedis) -> None:
    result = through_the_store(redis_server, JOBS, tasks=2)
    client = redis.Redis(port=redis_server.port, decode_responses=True)
    try:
        keys = Keys()
        assert client.zcard(keys.history) == JOBS  # the last phase's jobs, each once
        assert client.zcard(keys.pending) == 0 and client.zcard(keys.leases) == 0
    finally:
        client.close()
    assert result.accept.jobs_per_s > 0 and result.run.redis_cpu_s > 0
