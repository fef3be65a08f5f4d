from tests.unit.gateway.conftest import clock, redis_client, store

__all__ = ["clock", "redis_client", "store"]
