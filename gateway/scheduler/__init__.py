"""Placement: pure policies over frozen snapshots of the farm (no I/O, no await)."""

from gateway.scheduler import affinity
from gateway.scheduler.policies import affinity_only, ect, randomized, swarm
from gateway.scheduler.policies import baselines as basic

DEFAULT_POLICY = affinity.AffinityPolicy.name
"""The policy `--policy` selects when none is named."""

__all__ = ["DEFAULT_POLICY", "affinity", "affinity_only", "basic", "ect", "randomized", "swarm"]
