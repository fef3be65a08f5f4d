"""What the gateway learns of each worker (speeds, loads, residency, demand)."""
