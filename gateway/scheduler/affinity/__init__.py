"""`affinity`, the default placement policy: see `policy` for what it does and guarantees."""

from gateway.scheduler.affinity.policy import AffinityPolicy
from gateway.scheduler.affinity.tuning import Tuning

__all__ = ["AffinityPolicy", "Tuning"]
