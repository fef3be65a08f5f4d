"""Where each job's time goes (its phase ledger), summed per worker, group, family and shape,
and compared between groups (A/B experiments)."""
