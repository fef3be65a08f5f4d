"""Durable job state in Redis: keys, Lua transitions, the store, records, history."""
