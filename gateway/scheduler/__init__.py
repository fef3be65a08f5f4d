"""Placement: pure policies over frozen snapshots of the farm (no I/O, no await)."""
