"""Child processes of this node's workers: launch, supervise, restart, log."""
